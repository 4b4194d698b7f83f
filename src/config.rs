//! Typed configuration of `kmirror serve`: defaults < TOML file < `KMIRROR_*` environment <
//! command-line flags, validated at startup. An invalid value is one clear error naming the
//! field; secrets are redacted in `Debug`.
//!
//! See `kmirror.example.toml` for every field.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::auth::{Role, TokenEntry};
use crate::engine::EngineConfig;

/// A configuration error: which field, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {field}: {message}")]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

fn err(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError { field: field.to_string(), message: message.into() }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The TOML file, as written. Unknown fields are errors (a typo must not be silently ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub log_format: Option<String>,
    pub tls: Option<TlsFile>,
    pub destination: Option<DestinationFile>,
    pub auth: Option<AuthFile>,
    pub engine: Option<EngineFile>,
    pub secrets: Option<SecretsFile>,
    pub drills: Option<DrillsFile>,
}

/// Disaster-recovery drills.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrillsFile {
    /// File with the key drill reports are signed with (HMAC-SHA-256; at least 32 bytes, e.g.
    /// `openssl rand -hex 32`); without it a report carries a plain SHA-256 digest.
    pub signing_key_file: Option<PathBuf>,
}

/// Secrets: which references (`${env:NAME}`, `${file:/path}`) in client properties kmirror
/// resolves, and the key that encrypts secret values stored in the state topic.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsFile {
    /// Directories whose files `${file:...}` may name (default `/run/secrets`).
    pub file_dirs: Option<Vec<String>>,
    /// Environment variables `${env:...}` may name in mirror definitions: names or `*` globs
    /// (default none; `KMIRROR_*` never).
    pub env_allow: Option<Vec<String>>,
    /// Refuse plaintext values of secret properties (default false).
    pub require_references: Option<bool>,
    /// File with the key (32 random bytes, base64) that encrypts secret values in the state
    /// topic (`KMIRROR_SECRETS_KEY_FILE`).
    pub key_file: Option<PathBuf>,
    /// The key before a rotation: values it encrypted still open, and are encrypted under
    /// `key_file` on their next write (`KMIRROR_SECRETS_PREVIOUS_KEY_FILE`).
    pub previous_key_file: Option<PathBuf>,
    /// Store plaintext secret values when there is no key (default false: refused).
    pub allow_plaintext: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFile {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationFile {
    pub bootstrap_servers: Option<String>,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

impl std::fmt::Debug for DestinationFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DestinationFile")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("properties", &crate::domain::secrets::redact(&self.properties))
            .finish()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFile {
    #[serde(default)]
    pub tokens: Vec<TokenFile>,
    #[serde(default)]
    pub no_auth: bool,
}

/// A token: given inline (`token`) or, better, read from an environment variable (`token_env`)
/// or a file (`token_file`, its contents without the trailing line break) so the configuration
/// holds no secret.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenFile {
    pub name: String,
    pub role: String,
    pub token: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<PathBuf>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile").field("name", &self.name).field("role", &self.role).finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    pub state_topic: Option<String>,
    pub state_partitions: Option<i32>,
    pub cluster_name: Option<String>,
    pub instance_id: Option<String>,
    pub membership: Option<String>,
    pub session_timeout_ms: Option<u64>,
    pub advertised_url: Option<String>,
    pub commit_interval_ms: Option<u64>,
    pub early_commit_interval_ms: Option<u64>,
    pub commit_max_bytes: Option<usize>,
    pub lag_refresh_interval_ms: Option<u64>,
    /// 0: idle data paths stay open.
    pub close_idle_data_paths_after_ms: Option<u64>,
    pub metadata_refresh_interval_ms: Option<u64>,
    pub request_timeout_ms: Option<u64>,
    /// "per-slot" or "per-mirror": see `engine::SourceConsumers`.
    pub source_consumers: Option<String>,
    /// KIP-1279's `mirror.failed.retry.initial.backoff.ms`.
    pub failed_retry_initial_backoff_ms: Option<u64>,
    /// KIP-1279's `mirror.failed.retry.max.backoff.ms`.
    pub failed_retry_max_backoff_ms: Option<u64>,
    /// KIP-1279's `mirror.failed.retry.max.attempts` (0: no automatic retries).
    pub failed_retry_max_attempts: Option<u32>,
}

/// Values from the environment and the command line (clap merges both; flags win over env).
/// `Debug` leaves out the tokens.
#[derive(Default, Clone)]
pub struct Overrides {
    pub listen: Option<String>,
    pub log_format: Option<String>,
    pub destination_bootstrap: Option<String>,
    pub state_topic: Option<String>,
    pub state_partitions: Option<i32>,
    pub cluster_name: Option<String>,
    pub instance_id: Option<String>,
    pub membership: Option<String>,
    pub session_timeout_ms: Option<u64>,
    pub advertised_url: Option<String>,
    pub commit_interval_ms: Option<u64>,
    pub early_commit_interval_ms: Option<u64>,
    pub metadata_refresh_interval_ms: Option<u64>,
    /// `--token name:role:token` specs (visible in `ps`: a warning says so).
    pub tokens: Vec<String>,
    /// `--token-file name:role:/path` specs.
    pub token_files: Vec<String>,
    /// The set ones of [`role_token_variables`] (`KMIRROR_ADMIN_TOKEN`, `KMIRROR_VIEWER_TOKEN_FILE`,
    /// ...) by name; an empty value is unset.
    pub role_token_env: BTreeMap<String, String>,
    pub no_auth: bool,
    /// `--secrets-key-file` / `KMIRROR_SECRETS_KEY_FILE` (over `[secrets] key_file`).
    pub secrets_key_file: Option<PathBuf>,
    /// `--secrets-previous-key-file` / `KMIRROR_SECRETS_PREVIOUS_KEY_FILE`.
    pub secrets_previous_key_file: Option<PathBuf>,
}

impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overrides")
            .field("listen", &self.listen)
            .field("destination_bootstrap", &self.destination_bootstrap)
            .field("tokens", &self.tokens.len())
            .field("token_files", &self.token_files)
            .field("role_token_env", &self.role_token_env.keys().collect::<Vec<_>>())
            .field("no_auth", &self.no_auth)
            .finish_non_exhaustive()
    }
}

/// The effective, validated configuration.
#[derive(Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub log_format: LogFormat,
    pub tls: Option<(PathBuf, PathBuf)>,
    pub tokens: Vec<TokenEntry>,
    pub no_auth: bool,
    pub engine: EngineConfig,
    /// Which secret references client properties may use (`[secrets]`).
    pub secret_references: crate::domain::secrets::ReferencePolicy,
    /// What to warn about once logging runs (e.g. tokens given on the command line); never a
    /// secret.
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeConfig")
            .field("listen", &self.listen)
            .field("log_format", &self.log_format)
            .field("tls", &self.tls)
            .field("tokens", &self.tokens)
            .field("no_auth", &self.no_auth)
            .field("engine", &self.engine)
            .field("secret_references", &self.secret_references)
            .field("warnings", &self.warnings)
            .finish()
    }
}

/// Parses a TOML document; errors name the offending field.
pub fn parse_file(text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str::<FileConfig>(text).map_err(|e| {
        // toml reports the key path in its message (e.g. "unknown field `listn`"); keep it.
        let message = e.message().to_string();
        let field = message
            .split('`')
            .nth(1)
            .map(str::to_string)
            .or_else(|| e.span().map(|s| text.get(s).unwrap_or("").trim().to_string()))
            .unwrap_or_else(|| "(file)".to_string());
        err(&field, message)
    })
}

fn parse_token_spec(spec: &str) -> Result<TokenEntry, ConfigError> {
    let mut it = spec.splitn(3, ':');
    let (Some(name), Some(role), Some(token)) = (it.next(), it.next(), it.next()) else {
        return Err(err("token", "must look like name:role:token"));
    };
    let role: Role = role.parse().map_err(|e: String| err("token", e))?;
    check_token("token", name, token)?;
    Ok(TokenEntry { name: name.to_string(), role, token: token.to_string() })
}

/// A `--token-file name:role:/path` spec: the token is the file's contents.
fn parse_token_file_spec(spec: &str) -> Result<TokenEntry, ConfigError> {
    let field = "token-file";
    let mut it = spec.splitn(3, ':');
    let (Some(name), Some(role), Some(path)) = (it.next(), it.next(), it.next()) else {
        return Err(err(field, format!("{spec:?} must look like name:role:/path/to/file")));
    };
    if path.is_empty() {
        return Err(err(field, format!("{spec:?} names no file (name:role:/path/to/file)")));
    }
    let role: Role = role.parse().map_err(|e: String| err(field, e))?;
    let token = read_token_file(field, name, std::path::Path::new(path))?;
    check_token(field, name, &token)?;
    Ok(TokenEntry { name: name.to_string(), role, token })
}

/// The largest token file read: a token is at most [`crate::auth::MAX_TOKEN_LEN`] bytes.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The token in `path`: the file's contents without trailing line breaks, checked like every
/// token. Errors name the file and the token (`name`), never the contents.
fn read_token_file(field: &str, name: &str, path: &std::path::Path) -> Result<String, ConfigError> {
    let shown = path.display();
    let meta =
        std::fs::metadata(path).map_err(|e| err(field, format!("cannot read {shown} (token of {name:?}): {e}")))?;
    if !meta.is_file() {
        return Err(err(field, format!("{shown} (token of {name:?}) is not a regular file")));
    }
    if meta.len() > MAX_TOKEN_FILE_BYTES {
        return Err(err(
            field,
            format!("{shown} (token of {name:?}) has {} bytes: a token file holds only the token", meta.len()),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| err(field, format!("cannot read {shown} (token of {name:?}): {e}")))?;
    let text =
        String::from_utf8(bytes).map_err(|_| err(field, format!("{shown} (token of {name:?}) is not text (UTF-8)")))?;
    let token = text.trim_end_matches(['\n', '\r']);
    if token.is_empty() {
        return Err(err(field, format!("{shown} (token of {name:?}) is empty")));
    }
    check_token(field, name, token).map_err(|e| err(field, format!("{shown}: {}", e.message)))?;
    Ok(token.to_string())
}

/// The environment variable of a role's token (`KMIRROR_ADMIN_TOKEN`, ...); with `file`, the
/// variable naming a file that holds it (`KMIRROR_ADMIN_TOKEN_FILE`).
pub fn role_token_variable(role: Role, file: bool) -> String {
    let suffix = if file { "_FILE" } else { "" };
    format!("KMIRROR_{}_TOKEN{suffix}", role.as_str().to_ascii_uppercase())
}

/// Every role token variable: `KMIRROR_<ROLE>_TOKEN` and `KMIRROR_<ROLE>_TOKEN_FILE`.
pub fn role_token_variables() -> Vec<String> {
    Role::ALL.iter().flat_map(|r| [role_token_variable(*r, false), role_token_variable(*r, true)]).collect()
}

/// What `ps` shows about `--token`; logged as a warning when it is used.
pub const COMMAND_LINE_TOKEN_WARNING: &str =
    "tokens on the command line are visible to other users in ps; use --token-file or KMIRROR_<ROLE>_TOKEN";

/// Every configured token: `[[auth.tokens]]`, `--token`, `--token-file`, then the role variables
/// (one token each; a variable an entry's `token_env` already names is that entry, not another
/// token). The same token for two roles is refused (which would it be?); the same token twice
/// for one role counts once.
fn resolve_tokens(
    auth: &AuthFile,
    o: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<TokenEntry>, ConfigError> {
    let mut tokens = Vec::new();
    for (i, t) in auth.tokens.iter().enumerate() {
        let field = format!("auth.tokens[{i}]");
        let role: Role = t.role.parse().map_err(|e: String| err(&format!("{field}.role"), e))?;
        let token = match (&t.token, &t.token_env, &t.token_file) {
            (Some(tok), None, None) => tok.clone(),
            (None, Some(var), None) => env(var)
                .ok_or_else(|| err(&format!("{field}.token_env"), format!("environment variable {var} is not set")))?,
            (None, None, Some(path)) => read_token_file(&format!("{field}.token_file"), &t.name, path)?,
            _ => return Err(err(&field, "set exactly one of token, token_env, token_file")),
        };
        check_token(&field, &t.name, &token)?;
        tokens.push(TokenEntry { name: t.name.clone(), role, token });
    }
    for spec in &o.tokens {
        tokens.push(parse_token_spec(spec)?);
    }
    if !o.tokens.is_empty() {
        let names: Vec<&str> = o.tokens.iter().filter_map(|s| s.split(':').next()).collect();
        warnings.push(format!("{COMMAND_LINE_TOKEN_WARNING} (--token given for {})", names.join(", ")));
    }
    for spec in &o.token_files {
        tokens.push(parse_token_file_spec(spec)?);
    }
    let set = |name: &str| o.role_token_env.get(name).filter(|v| !v.trim().is_empty());
    for role in Role::ALL {
        let (var, file_var) = (role_token_variable(role, false), role_token_variable(role, true));
        let named_by_entry = |v: &str| auth.tokens.iter().any(|t| t.token_env.as_deref() == Some(v));
        let (name, token) = match (set(&var).filter(|_| !named_by_entry(&var)), set(&file_var)) {
            (None, None) => continue,
            (Some(_), Some(_)) => return Err(err(&var, format!("set only one of {var} and {file_var}"))),
            (Some(token), None) => {
                let name = format!("{} ({var})", role.as_str());
                check_token(&var, &name, token)?;
                (name, token.clone())
            }
            (None, Some(path)) => {
                let name = format!("{} ({file_var})", role.as_str());
                let token = read_token_file(&file_var, &name, std::path::Path::new(path))?;
                check_token(&file_var, &name, &token)?;
                (name, token)
            }
        };
        tokens.push(TokenEntry { name, role, token });
    }
    // Startup only: no need for constant time here.
    let mut unique: Vec<TokenEntry> = Vec::with_capacity(tokens.len());
    for t in tokens {
        match unique.iter().find(|u| u.token == t.token) {
            None => unique.push(t),
            Some(u) if u.role == t.role => {}
            Some(u) => {
                return Err(err(
                    "auth.tokens",
                    format!(
                        "{:?} ({}) and {:?} ({}) have the same token: give each role its own",
                        u.name,
                        u.role.as_str(),
                        t.name,
                        t.role.as_str()
                    ),
                ));
            }
        }
    }
    Ok(unique)
}

/// A token needs a name and at least [`crate::auth::MIN_TOKEN_LEN`] characters; the error names
/// the token, never shows it.
fn check_token(field: &str, name: &str, token: &str) -> Result<(), ConfigError> {
    if name.trim().is_empty() {
        return Err(err(field, "a token needs a name"));
    }
    crate::auth::check_token_strength(name, token).map_err(|e| err(field, e))
}

/// This host's name, when it is a valid instance id.
fn host_name() -> Option<String> {
    let name = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|s| s.trim().to_string())?;
    crate::engine::validate_mirror_name(&name).ok().map(|()| name)
}

/// The longest `engine.commit_interval_ms` accepted: half the producers' transaction timeout, so
/// a transaction held up (a slow commit, a flush behind a backlog) still ends before the broker
/// aborts it.
pub const MAX_COMMIT_INTERVAL: Duration = Duration::from_secs(crate::kafka::TRANSACTION_TIMEOUT.as_secs() / 2);

fn positive_ms(field: &str, v: u64) -> Result<Duration, ConfigError> {
    if v == 0 {
        return Err(err(field, "must be greater than 0"));
    }
    Ok(Duration::from_millis(v))
}

/// Builds the effective configuration from the file (if any) and the overrides.
pub fn resolve(file: Option<FileConfig>, o: &Overrides) -> Result<ServeConfig, ConfigError> {
    let file = file.unwrap_or_default();
    let listen_text = o.listen.clone().or(file.listen).unwrap_or_else(|| "127.0.0.1:8080".to_string());
    let listen: SocketAddr = listen_text
        .parse()
        .map_err(|_| err("listen", format!("{listen_text:?} is not an address like 127.0.0.1:8080")))?;
    let log_format = match o.log_format.clone().or(file.log_format).as_deref().unwrap_or("text") {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => return Err(err("log_format", format!("{other:?} is not one of text, json"))),
    };
    let dest = file.destination;
    let bootstrap = o
        .destination_bootstrap
        .clone()
        .or_else(|| dest.as_ref().and_then(|d| d.bootstrap_servers.clone()))
        .filter(|b| !b.trim().is_empty())
        .ok_or_else(|| err("destination.bootstrap_servers", "is required (or --destination-bootstrap)"))?;
    let mut engine = EngineConfig::new(bootstrap);
    engine.destination_properties = dest.map(|d| d.properties).unwrap_or_default();
    let secrets_file = file.secrets.unwrap_or_default();
    let mut secret_references = crate::domain::secrets::ReferencePolicy::default();
    if let Some(dirs) = secrets_file.file_dirs {
        for d in &dirs {
            if !crate::domain::secrets::is_clean_absolute_path(d) {
                return Err(err("secrets.file_dirs", format!("{d:?} must be an absolute path without . or ..")));
            }
        }
        secret_references.file_dirs = dirs;
    }
    secret_references.require_references = secrets_file.require_references.unwrap_or(false);
    if let Some(allow) = secrets_file.env_allow {
        for a in &allow {
            if a.is_empty() || !a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*') {
                return Err(err("secrets.env_allow", format!("{a:?} must be letters, digits, underscores and *")));
            }
        }
        secret_references.env_allow = allow;
    }
    // The deployment's own configuration may reference the variables it names (the
    // destination's credentials): the operator who writes this file controls the environment.
    // They are resolved here, once (a process's environment does not change), so the policy in
    // force for mirror definitions, which an API admin writes, stays `env_allow` alone: a
    // mirror must not be able to send the destination's password to a source of its choosing.
    let mut dest_policy = secret_references.clone();
    dest_policy.env_allow.extend(engine.destination_properties.values().filter_map(|v| {
        match crate::domain::secrets::Reference::parse(v) {
            Some(crate::domain::secrets::Reference::Env(var)) => Some(var.to_string()),
            _ => None,
        }
    }));
    // The same allow list and reference policy as a mirror's source properties; the error names
    // the property, never its value.
    crate::domain::secrets::validate(&engine.destination_properties, &dest_policy)
        .map_err(|e| err("destination.properties", e.to_string()))?;
    for (name, value) in engine.destination_properties.iter_mut() {
        if let Some(crate::domain::secrets::Reference::Env(var)) = crate::domain::secrets::Reference::parse(value) {
            *value = std::env::var(var).map_err(|_| {
                err("destination.properties", format!("{name:?}: environment variable {var} is not set (or not UTF-8)"))
            })?;
        }
    }
    let read_key = |field: &str, path: &std::path::Path| {
        crate::store::seal::SecretKey::read(path).map_err(|e| err(field, e.to_string()))
    };
    let key = match o.secrets_key_file.as_ref().or(secrets_file.key_file.as_ref()) {
        Some(p) => Some(read_key("secrets.key_file", p)?),
        None => None,
    };
    let previous = match o.secrets_previous_key_file.as_ref().or(secrets_file.previous_key_file.as_ref()) {
        Some(p) => Some(read_key("secrets.previous_key_file", p)?),
        None => None,
    };
    if previous.is_some() && key.is_none() {
        return Err(err("secrets.previous_key_file", "needs secrets.key_file (the new key) beside it"));
    }
    engine.sealer = crate::store::seal::Sealer::new(key, previous, secrets_file.allow_plaintext.unwrap_or(false));
    let ef = file.engine.unwrap_or_default();
    // Read first: the rest of `ef` is taken apart below.
    let retry = retry_policy(&ef)?;
    if let Some(t) = o.state_topic.clone().or(ef.state_topic) {
        crate::engine::validate_topic_name(&t).map_err(|e| err("engine.state_topic", e.to_string()))?;
        engine.state_topic = t;
    }
    if let Some(n) = o.state_partitions.or(ef.state_partitions) {
        if !(1..=1000).contains(&n) {
            return Err(err("engine.state_partitions", "must be between 1 and 1000"));
        }
        engine.state_partitions = n;
    }
    if let Some(name) = o.cluster_name.clone().or(ef.cluster_name) {
        crate::engine::validate_mirror_name(&name)
            .map_err(|_| err("engine.cluster_name", "use 1 to 249 characters from [a-zA-Z0-9._-]"))?;
        engine.cluster_name = name;
    }
    match o.instance_id.clone().or(ef.instance_id) {
        Some(id) => {
            crate::engine::validate_mirror_name(&id)
                .map_err(|_| err("engine.instance_id", "use 1 to 249 characters from [a-zA-Z0-9._-]"))?;
            engine.instance_id = id;
        }
        // Unique per host without configuration (a StatefulSet's pods are kmirror-0, -1, ...),
        // and stable across restarts, so static membership keeps a restarted instance's slots.
        None => engine.instance_id = host_name().unwrap_or_else(|| "kmirror".to_string()),
    }
    let session_timeout =
        positive_ms("engine.session_timeout_ms", o.session_timeout_ms.or(ef.session_timeout_ms).unwrap_or(10_000))?;
    // The broker refuses a session timeout outside group.min/max.session.timeout.ms (6 s and
    // 30 min by default); below its heartbeat interval a member could never stay in the group.
    if session_timeout < Duration::from_secs(1) {
        return Err(err("engine.session_timeout_ms", "must be at least 1000"));
    }
    let advertised_url = o.advertised_url.clone().or(ef.advertised_url);
    if let Some(u) = &advertised_url
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(err("engine.advertised_url", format!("{u:?} must start with http:// or https://")));
    }
    engine.ownership = match o.membership.clone().or(ef.membership).as_deref().unwrap_or("group") {
        "group" => crate::engine::Ownership::Group { session_timeout, advertised_url },
        "standalone" => crate::engine::Ownership::Standalone,
        other => return Err(err("engine.membership", format!("{other:?} is not one of group, standalone"))),
    };
    if let Some(v) = o.commit_interval_ms.or(ef.commit_interval_ms) {
        engine.commit_interval = positive_ms("engine.commit_interval_ms", v)?;
    }
    // The data path's producer has `transaction.timeout.ms` = `kafka::TRANSACTION_TIMEOUT` unless
    // the destination properties say otherwise: a transaction open that long is aborted by the
    // broker, and one near it would be after any slow flush.
    let transaction_timeout = engine
        .destination_properties
        .get("transaction.timeout.ms")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(crate::kafka::TRANSACTION_TIMEOUT, Duration::from_millis);
    let max_commit_interval = MAX_COMMIT_INTERVAL.min(transaction_timeout / 2);
    if engine.commit_interval > max_commit_interval {
        return Err(err(
            "engine.commit_interval_ms",
            format!(
                "{} ms is longer than half the destination's transaction.timeout.ms ({} ms): the broker would \
                 abort transactions; at most {} ms",
                engine.commit_interval.as_millis(),
                transaction_timeout.as_millis(),
                max_commit_interval.as_millis()
            ),
        ));
    }
    if let Some(v) = o.early_commit_interval_ms.or(ef.early_commit_interval_ms) {
        engine.early_commit_interval = positive_ms("engine.early_commit_interval_ms", v)?;
    }
    // An early commit later than the regular one would never be early; say so rather than
    // silently using the commit interval.
    if engine.early_commit_interval > engine.commit_interval {
        return Err(err(
            "engine.early_commit_interval_ms",
            format!(
                "{} ms is longer than engine.commit_interval_ms ({} ms)",
                engine.early_commit_interval.as_millis(),
                engine.commit_interval.as_millis()
            ),
        ));
    }
    if let Some(v) = ef.commit_max_bytes {
        if v < 1024 {
            return Err(err("engine.commit_max_bytes", "must be at least 1024"));
        }
        engine.commit_max_bytes = v;
    }
    if let Some(v) = ef.lag_refresh_interval_ms {
        engine.lag_refresh_interval = positive_ms("engine.lag_refresh_interval_ms", v)?;
    }
    if let Some(v) = ef.close_idle_data_paths_after_ms {
        engine.close_idle_data_paths_after = (v > 0).then(|| Duration::from_millis(v));
    }
    if let Some(v) = &ef.source_consumers {
        engine.source_consumers = crate::engine::SourceConsumers::parse(v).ok_or_else(|| {
            err("engine.source_consumers", format!("{v:?} is not one of \"per-slot\", \"per-mirror\""))
        })?;
    }
    if let Some(v) = o.metadata_refresh_interval_ms.or(ef.metadata_refresh_interval_ms) {
        engine.metadata_refresh_interval = positive_ms("engine.metadata_refresh_interval_ms", v)?;
    }
    if let Some(v) = ef.request_timeout_ms {
        engine.request_timeout = positive_ms("engine.request_timeout_ms", v)?;
    }
    engine.retry_policy = retry;
    if let Some(path) = file.drills.and_then(|d| d.signing_key_file) {
        let field = "drills.signing_key_file";
        let bytes =
            std::fs::read(&path).map_err(|e| err(field, format!("cannot read {}: {}", path.display(), e.kind())))?;
        let key = crate::engine::DrillSigningKey::from_file_contents(&bytes)
            .map_err(|e| err(field, format!("{}: {e}", path.display())))?;
        engine.drill_signing_key = Some(key);
    }
    let auth = file.auth.unwrap_or_default();
    let mut warnings = Vec::new();
    let tokens = resolve_tokens(&auth, o, &|var| std::env::var(var).ok(), &mut warnings)?;
    let no_auth = o.no_auth || auth.no_auth;
    if no_auth && !listen.ip().is_loopback() {
        return Err(err("auth.no_auth", format!("is only accepted with a loopback listen address, not {listen}")));
    }
    let tls = match file.tls {
        None => None,
        Some(t) => {
            for (f, p) in [("tls.cert", &t.cert), ("tls.key", &t.key)] {
                if !p.is_file() {
                    return Err(err(f, format!("{} is not a readable file", p.display())));
                }
            }
            Some((t.cert, t.key))
        }
    };
    Ok(ServeConfig { listen, log_format, tls, tokens, no_auth, engine, secret_references, warnings })
}

/// The FAILED partitions' retry policy from `[engine]` (KIP-1279's `mirror.failed.retry.*`, with
/// its ranges: attempts 0–32767, 0 = no automatic retries).
fn retry_policy(ef: &EngineFile) -> Result<crate::domain::RetryPolicy, ConfigError> {
    use crate::domain::{Backoff, RetryPolicy};
    let default = RetryPolicy::DEFAULT;
    let initial = match ef.failed_retry_initial_backoff_ms {
        Some(v) => positive_ms("engine.failed_retry_initial_backoff_ms", v).map(|_| v)?,
        None => default.backoff.initial_ms(),
    };
    let max = match ef.failed_retry_max_backoff_ms {
        Some(v) => positive_ms("engine.failed_retry_max_backoff_ms", v).map(|_| v)?,
        None => default.backoff.max_ms().max(initial),
    };
    if max < initial {
        return Err(err(
            "engine.failed_retry_max_backoff_ms",
            format!("{max} ms is shorter than engine.failed_retry_initial_backoff_ms ({initial} ms)"),
        ));
    }
    let max_attempts = ef.failed_retry_max_attempts.unwrap_or(default.max_attempts);
    if max_attempts > 32_767 {
        return Err(err("engine.failed_retry_max_attempts", format!("{max_attempts} is above 32767")));
    }
    Ok(RetryPolicy { backoff: Backoff::new(initial, max), max_attempts })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_resolves() {
        let f = parse_file(
            r#"
listen = "127.0.0.1:9090"
log_format = "json"
[destination]
bootstrap_servers = "kafka-dr:9092"
[destination.properties]
"security.protocol" = "SASL_SSL"
"sasl.password" = "hunter2"
[[auth.tokens]]
name = "ci"
role = "operator"
token = "0123456789abcdef0123456789abcdef"
[engine]
state_topic = "__mirror_state"
commit_interval_ms = 250
early_commit_interval_ms = 25
metadata_refresh_interval_ms = 10000
"#,
        )
        .unwrap();
        let c = resolve(Some(f), &Overrides::default()).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:9090");
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.engine.destination_bootstrap, "kafka-dr:9092");
        assert_eq!(c.engine.commit_interval, Duration::from_millis(250));
        assert_eq!(c.engine.early_commit_interval, Duration::from_millis(25));
        assert_eq!(c.tokens[0].role, Role::Operator);
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2") && !shown.contains("0123456789abcdef"), "{shown}");
    }

    #[test]
    fn the_failed_retry_policy_comes_from_the_engine_section_and_is_checked() {
        use crate::domain::{Backoff, RetryPolicy};
        let base = "[destination]\nbootstrap_servers = \"a:1\"\n[engine]\n";
        let policy = |extra: &str| {
            resolve(Some(parse_file(&format!("{base}{extra}")).unwrap()), &Overrides::default())
                .map(|c| c.engine.retry_policy)
        };
        assert_eq!(policy("").unwrap(), RetryPolicy::DEFAULT);
        assert_eq!(
            policy("failed_retry_initial_backoff_ms = 100\nfailed_retry_max_backoff_ms = 5000\nfailed_retry_max_attempts = 0\n")
                .unwrap(),
            RetryPolicy { backoff: Backoff::new(100, 5_000), max_attempts: 0 }
        );
        // An initial backoff above the default cap raises the cap with it.
        assert_eq!(policy("failed_retry_initial_backoff_ms = 600000\n").unwrap().backoff.max_ms(), 600_000);
        for (extra, field) in [
            ("failed_retry_initial_backoff_ms = 0\n", "engine.failed_retry_initial_backoff_ms"),
            (
                "failed_retry_max_backoff_ms = 10\nfailed_retry_initial_backoff_ms = 20\n",
                "engine.failed_retry_max_backoff_ms",
            ),
            ("failed_retry_max_attempts = 40000\n", "engine.failed_retry_max_attempts"),
        ] {
            assert_eq!(policy(extra).unwrap_err().field, field, "{extra}");
        }
    }

    #[test]
    fn source_consumers_are_per_slot_unless_the_engine_section_says_per_mirror() {
        use crate::engine::SourceConsumers;
        let base = "[destination]\nbootstrap_servers = \"a:1\"\n[engine]\n";
        let resolved =
            |extra: &str| resolve(Some(parse_file(&format!("{base}{extra}")).unwrap()), &Overrides::default());
        assert_eq!(resolved("").unwrap().engine.source_consumers, SourceConsumers::PerSlot);
        let shared = resolved("source_consumers = \"per-mirror\"\n").unwrap();
        assert_eq!(shared.engine.source_consumers, SourceConsumers::PerMirror);
        let e = resolved("source_consumers = \"shared\"\n").unwrap_err();
        assert_eq!(e.field, "engine.source_consumers");
        assert!(e.to_string().contains("per-mirror"), "{e}");
    }

    #[test]
    fn secrets_keys_and_the_env_allow_list_are_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("kmirror-config-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (key, text) = crate::store::seal::SecretKey::generate();
        let key_path = dir.join("k");
        std::fs::write(&key_path, format!("{text}\n")).unwrap();
        let with = |secrets: &str| {
            let file = format!("[destination]\nbootstrap_servers = \"a:1\"\n[secrets]\n{secrets}");
            resolve(Some(parse_file(&file).unwrap()), &Overrides::default())
        };
        let c = with(&format!("key_file = {:?}\nenv_allow = [\"DR_*\"]\n", key_path.display().to_string())).unwrap();
        assert_eq!(c.engine.sealer.key_id(), Some(key.id()));
        assert_eq!(c.secret_references.env_allow, vec!["DR_*".to_string()]);
        assert!(!format!("{c:?}").contains(&text), "the key never shows");
        // No key and no allow_plaintext: plaintext secrets will be refused.
        assert!(!with("").unwrap().engine.sealer.accepts_plaintext());
        assert!(with("allow_plaintext = true\n").unwrap().engine.sealer.accepts_plaintext());
        // Errors name the field, never the key.
        let bad = dir.join("bad");
        std::fs::write(&bad, "c2hvcnQ=").unwrap();
        let e = with(&format!("key_file = {:?}\n", bad.display().to_string())).unwrap_err();
        assert_eq!(e.field, "secrets.key_file");
        assert!(e.to_string().contains("generate-key"), "{e}");
        let e = with("key_file = \"/nonexistent/kmirror.key\"\n").unwrap_err();
        assert_eq!(e.field, "secrets.key_file");
        let e = with(&format!("previous_key_file = {:?}\n", key_path.display().to_string())).unwrap_err();
        assert_eq!(e.field, "secrets.previous_key_file");
        assert_eq!(with("env_allow = [\"A-B\"]\n").unwrap_err().field, "secrets.env_allow");
        // The flag (KMIRROR_SECRETS_KEY_FILE) wins over the file.
        let o = Overrides { secrets_key_file: Some(key_path.clone()), ..Default::default() };
        let file = "[destination]\nbootstrap_servers = \"a:1\"\n[secrets]\nkey_file = \"/nonexistent\"\n";
        assert_eq!(resolve(Some(parse_file(file).unwrap()), &o).unwrap().engine.sealer.key_id(), Some(key.id()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_destination_may_reference_the_variables_its_own_file_names_and_they_resolve_at_load() {
        // PATH is set in every process; it stands for the destination's password variable.
        let path = std::env::var("PATH").unwrap();
        let file = "[destination]\nbootstrap_servers = \"a:1\"\n[destination.properties]\n\"sasl.password\" = \"${env:PATH}\"\n";
        let c = resolve(Some(parse_file(file).unwrap()), &Overrides::default()).unwrap();
        assert_eq!(c.engine.destination_properties["sasl.password"], path);
        // ...but mirror definitions do not get that variable.
        assert!(!c.secret_references.allows_env("PATH"));
        let unset = file.replace("PATH", "KMIRROR_TEST_NO_SUCH_VARIABLE_ZZ").replace("KMIRROR_", "NO_");
        let e = resolve(Some(parse_file(&unset).unwrap()), &Overrides::default()).unwrap_err();
        assert_eq!(e.field, "destination.properties");
        assert!(e.to_string().contains("is not set"), "{e}");
    }

    #[test]
    fn short_tokens_are_refused_naming_the_token_not_its_value() {
        let base = "[destination]\nbootstrap_servers = \"a:1\"\n";
        let e = resolve(
            Some(
                parse_file(&format!(
                    "{base}[[auth.tokens]]\nname = \"ci\"\nrole = \"viewer\"\ntoken = \"tiny-secret\"\n"
                ))
                .unwrap(),
            ),
            &Overrides::default(),
        )
        .unwrap_err();
        assert_eq!(e.field, "auth.tokens[0]");
        assert!(
            e.message.contains("\"ci\"") && e.message.contains("32") && !e.to_string().contains("tiny-secret"),
            "{e}"
        );
        let o = Overrides { tokens: vec!["cli:admin:tiny-secret".into()], ..Default::default() };
        let e = resolve(Some(parse_file(base).unwrap()), &o).unwrap_err();
        assert!(e.to_string().contains("\"cli\"") && !e.to_string().contains("tiny-secret"), "{e}");
        let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let o = Overrides { role_token_env: env(&[("KMIRROR_ADMIN_TOKEN", "x")]), ..Default::default() };
        let e = resolve(Some(parse_file(base).unwrap()), &o).unwrap_err();
        assert_eq!(e.field, "KMIRROR_ADMIN_TOKEN", "{e}");
        let long = "k".repeat(32);
        let o = Overrides {
            role_token_env: env(&[("KMIRROR_ADMIN_TOKEN", &long)]),
            tokens: vec![format!("cli:viewer:{}", "v".repeat(32))],
            ..Default::default()
        };
        let c = resolve(Some(parse_file(base).unwrap()), &o).unwrap();
        assert_eq!(c.tokens.len(), 2);
        assert_eq!(c.tokens[1].role, Role::Admin);
        let o = Overrides { role_token_env: env(&[("KMIRROR_ADMIN_TOKEN", "  ")]), ..Default::default() };
        assert!(resolve(Some(parse_file(base).unwrap()), &o).unwrap().tokens.is_empty(), "empty means unset");
    }

    /// A file in a fresh temporary directory, removed with it.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "kmirror-config-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn file(&self, name: &str, contents: &[u8]) -> String {
            let p = self.0.join(name);
            std::fs::write(&p, contents).unwrap();
            p.to_str().unwrap().to_string()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const BASE: &str = "[destination]\nbootstrap_servers = \"a:1\"\n";

    #[test]
    fn the_drill_signing_key_is_read_checked_and_never_shown() {
        let dir = TempDir::new();
        let key = "5f0c1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff";
        let good = dir.file("drill.key", format!("{key}\n").as_bytes());
        let short = dir.file("short.key", b"tooshort\n");
        let resolve_with = |path: &str| {
            resolve(
                Some(parse_file(&format!("{BASE}[drills]\nsigning_key_file = {path:?}\n")).unwrap()),
                &Overrides::default(),
            )
        };
        let c = resolve_with(&good).unwrap();
        let k = c.engine.drill_signing_key.clone().expect("a signing key");
        assert_eq!(k.id(), crate::domain::drill::key_id(key.as_bytes()));
        let shown = format!("{c:?} {:?}", c.engine);
        assert!(!shown.contains(key), "{shown}");
        let e = resolve_with(&short).unwrap_err();
        assert_eq!(e.field, "drills.signing_key_file");
        assert!(e.message.contains("at least 32") && !e.message.contains("tooshort"), "{}", e.message);
        let e = resolve_with("/nonexistent/drill.key").unwrap_err();
        assert_eq!(e.field, "drills.signing_key_file");
        assert!(
            resolve(Some(parse_file(BASE).unwrap()), &Overrides::default()).unwrap().engine.drill_signing_key.is_none()
        );
    }

    fn with(o: &Overrides) -> Result<ServeConfig, ConfigError> {
        resolve(Some(parse_file(BASE).unwrap()), o)
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_role_has_a_token_variable_and_a_file_variable() {
        assert_eq!(
            role_token_variables(),
            [
                "KMIRROR_VIEWER_TOKEN",
                "KMIRROR_VIEWER_TOKEN_FILE",
                "KMIRROR_OPERATOR_TOKEN",
                "KMIRROR_OPERATOR_TOKEN_FILE",
                "KMIRROR_ADMIN_TOKEN",
                "KMIRROR_ADMIN_TOKEN_FILE",
            ]
        );
        let dir = TempDir::new();
        let (viewer, operator, admin) = ("v".repeat(32), "o".repeat(40), "a".repeat(64));
        let admin_file = dir.file("admin", format!("{admin}\n").as_bytes());
        let o = Overrides {
            role_token_env: env(&[
                ("KMIRROR_VIEWER_TOKEN", &viewer),
                ("KMIRROR_OPERATOR_TOKEN", &operator),
                ("KMIRROR_ADMIN_TOKEN_FILE", &admin_file),
            ]),
            ..Default::default()
        };
        let c = with(&o).unwrap();
        let got: Vec<(&str, Role, &str)> =
            c.tokens.iter().map(|t| (t.name.as_str(), t.role, t.token.as_str())).collect();
        assert_eq!(
            got,
            [
                ("viewer (KMIRROR_VIEWER_TOKEN)", Role::Viewer, viewer.as_str()),
                ("operator (KMIRROR_OPERATOR_TOKEN)", Role::Operator, operator.as_str()),
                ("admin (KMIRROR_ADMIN_TOKEN_FILE)", Role::Admin, admin.as_str()),
            ]
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let shown = format!("{c:?} {o:?}");
        assert!(!shown.contains(&viewer) && !shown.contains(&admin), "{shown}");
        // One of the two per role.
        let o = Overrides {
            role_token_env: env(&[("KMIRROR_ADMIN_TOKEN", &admin), ("KMIRROR_ADMIN_TOKEN_FILE", &admin_file)]),
            ..Default::default()
        };
        let e = with(&o).unwrap_err();
        assert!(e.to_string().contains("set only one of KMIRROR_ADMIN_TOKEN and KMIRROR_ADMIN_TOKEN_FILE"), "{e}");
        // A short token from a variable names the variable, not the value.
        let o = Overrides { role_token_env: env(&[("KMIRROR_OPERATOR_TOKEN", "tiny-secret")]), ..Default::default() };
        let e = with(&o).unwrap_err();
        assert_eq!(e.field, "KMIRROR_OPERATOR_TOKEN");
        assert!(e.message.contains("32 characters") && !e.to_string().contains("tiny-secret"), "{e}");
        // A variable an entry's token_env names is that entry, not a second token.
        let f = parse_file(&format!(
            "{BASE}[[auth.tokens]]\nname = \"grafana\"\nrole = \"viewer\"\ntoken_env = \"KMIRROR_VIEWER_TOKEN\"\n"
        ))
        .unwrap();
        let o = Overrides { role_token_env: env(&[("KMIRROR_VIEWER_TOKEN", &viewer)]), ..Default::default() };
        let lookup = |v: &str| o.role_token_env.get(v).cloned();
        let tokens = resolve_tokens(&f.auth.unwrap(), &o, &lookup, &mut Vec::new()).unwrap();
        assert_eq!(tokens.len(), 1, "{tokens:?}");
        assert_eq!((tokens[0].name.as_str(), tokens[0].role), ("grafana", Role::Viewer));
    }

    #[test]
    fn token_files_from_flags_variables_and_the_file() {
        let dir = TempDir::new();
        let secret = "file-token-0123456789abcdef0123456789";
        let lf = dir.file("lf", format!("{secret}\n").as_bytes());
        let crlf = dir.file("crlf", format!("{secret}-2\r\n").as_bytes());
        let bare = dir.file("bare", format!("{secret}-3").as_bytes());
        let o = Overrides {
            token_files: vec![format!("ops:operator:{lf}"), format!("ci:admin:{crlf}"), format!("ro:viewer:{bare}")],
            ..Default::default()
        };
        let c = with(&o).unwrap();
        let got: Vec<(&str, Role, &str)> =
            c.tokens.iter().map(|t| (t.name.as_str(), t.role, t.token.as_str())).collect();
        let (two, three) = (format!("{secret}-2"), format!("{secret}-3"));
        assert_eq!(got, [("ops", Role::Operator, secret), ("ci", Role::Admin, &two), ("ro", Role::Viewer, &three)]);
        assert!(c.warnings.is_empty(), "token files are not on the command line");
        // In the TOML file.
        let f = parse_file(&format!(
            "{BASE}[[auth.tokens]]\nname = \"oncall\"\nrole = \"operator\"\ntoken_file = \"{lf}\"\n"
        ))
        .unwrap();
        let c = resolve(Some(f), &Overrides::default()).unwrap();
        assert_eq!((c.tokens[0].name.as_str(), c.tokens[0].token.as_str()), ("oncall", secret));
        let f = parse_file(&format!(
            "{BASE}[[auth.tokens]]\nname = \"x\"\nrole = \"operator\"\ntoken = \"{secret}\"\ntoken_file = \"{lf}\"\n"
        ))
        .unwrap();
        let e = resolve(Some(f), &Overrides::default()).unwrap_err();
        assert_eq!(e.field, "auth.tokens[0]");
        assert!(e.message.contains("exactly one of token, token_env, token_file"), "{e}");

        // Every bad file is one clear error naming the file and the token, never the contents.
        let short = dir.file("short", b"tiny-secret\n");
        let empty = dir.file("empty", b"\n");
        let spaced = dir.file("spaced", format!("{secret}  \n").as_bytes());
        let binary = dir.file("binary", &[0xff, 0xfe, 0x00, 0x41]);
        let big = dir.file("big", "b".repeat(5000).as_bytes());
        let missing = dir.0.join("missing").to_str().unwrap().to_string();
        let folder = dir.0.to_str().unwrap().to_string();
        for (spec, says) in [
            (format!("ops:operator:{short}"), "shorter than 32 characters"),
            (format!("ops:operator:{empty}"), "is empty"),
            (format!("ops:operator:{spaced}"), "printable ASCII"),
            (format!("ops:operator:{binary}"), "is not text"),
            (format!("ops:operator:{big}"), "has 5000 bytes"),
            (format!("ops:operator:{missing}"), "cannot read"),
            (format!("ops:operator:{folder}"), "is not a regular file"),
            (format!("ops:root:{lf}"), "unknown role"),
            ("ops:operator".to_string(), "name:role:/path"),
            ("ops:operator:".to_string(), "names no file"),
        ] {
            let e = with(&Overrides { token_files: vec![spec.clone()], ..Default::default() }).unwrap_err();
            assert_eq!(e.field, "token-file", "{spec}: {e}");
            assert!(e.message.contains(says), "{spec}: {e}");
            let text = e.to_string();
            assert!(!text.contains("tiny-secret") && !text.contains(secret), "{spec}: {e}");
            if let Some(path) = spec.splitn(3, ':').nth(2).filter(|p| !p.is_empty() && !spec.contains("root")) {
                assert!(text.contains(path), "{spec} names the file: {e}");
            }
            if !spec.contains("root") && spec.matches(':').count() == 2 && !spec.ends_with(':') {
                assert!(text.contains("\"ops\""), "{spec} names the token: {e}");
            }
        }
        let e =
            with(&Overrides { role_token_env: env(&[("KMIRROR_VIEWER_TOKEN_FILE", &missing)]), ..Default::default() })
                .unwrap_err();
        assert_eq!(e.field, "KMIRROR_VIEWER_TOKEN_FILE");
        assert!(e.message.contains("cannot read") && e.message.contains(&missing), "{e}");
        let f = parse_file(&format!(
            "{BASE}[[auth.tokens]]\nname = \"oncall\"\nrole = \"operator\"\ntoken_file = \"{short}\"\n"
        ))
        .unwrap();
        let e = resolve(Some(f), &Overrides::default()).unwrap_err();
        assert!(e.message.contains("\"oncall\"") && !e.to_string().contains("tiny-secret"), "{e}");
    }

    #[test]
    fn command_line_tokens_are_warned_about_and_one_token_has_one_role() {
        let (a, b) = ("a".repeat(32), "b".repeat(32));
        let c = with(&Overrides { tokens: vec![format!("ops:operator:{a}")], ..Default::default() }).unwrap();
        assert_eq!(c.warnings.len(), 1);
        assert!(
            c.warnings[0].starts_with(COMMAND_LINE_TOKEN_WARNING) && c.warnings[0].contains("ops"),
            "{:?}",
            c.warnings
        );
        assert!(!c.warnings[0].contains(&a));
        // The same token for two roles is ambiguous; for one role it counts once.
        let o = Overrides {
            tokens: vec![format!("ops:operator:{a}")],
            role_token_env: env(&[("KMIRROR_ADMIN_TOKEN", &a)]),
            ..Default::default()
        };
        let e = with(&o).unwrap_err();
        assert!(e.message.contains("\"ops\" (operator)") && e.message.contains("same token"), "{e}");
        assert!(!e.to_string().contains(&a), "{e}");
        let o = Overrides {
            tokens: vec![format!("ops:operator:{a}"), format!("ops2:operator:{a}"), format!("ro:viewer:{b}")],
            role_token_env: env(&[("KMIRROR_OPERATOR_TOKEN", &a)]),
            ..Default::default()
        };
        let names: Vec<String> = with(&o).unwrap().tokens.into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["ops", "ro"]);
    }

    #[test]
    fn overrides_win_over_the_file() {
        let f = parse_file("listen = \"127.0.0.1:1111\"\n[destination]\nbootstrap_servers = \"a:9092\"\n").unwrap();
        let o = Overrides { listen: Some("127.0.0.1:2222".into()), ..Default::default() };
        assert_eq!(resolve(Some(f), &o).unwrap().listen.to_string(), "127.0.0.1:2222");
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse_file("listn = \"x\"").unwrap_err();
        assert_eq!(e.field, "listn", "{e}");
        let e = parse_file("[engine]\ncommit_interval_ms = \"fast\"").unwrap_err();
        assert!(e.to_string().contains("commit_interval_ms") || e.field.contains("fast"), "{e}");
        let bad = |toml: &str| resolve(Some(parse_file(toml).unwrap()), &Overrides::default()).unwrap_err();
        assert_eq!(bad("listen = \"nope\"\n[destination]\nbootstrap_servers = \"a:1\"").field, "listen");
        assert_eq!(bad("").field, "destination.bootstrap_servers");
        assert_eq!(
            bad("[destination]\nbootstrap_servers = \"a:1\"\n[[auth.tokens]]\nname = \"x\"\nrole = \"root\"\ntoken = \"0123456789\"")
                .field,
            "auth.tokens[0].role"
        );
        assert_eq!(
            bad("[destination]\nbootstrap_servers = \"a:1\"\n[engine]\ncommit_interval_ms = 0").field,
            "engine.commit_interval_ms"
        );
        assert_eq!(
            bad("[destination]\nbootstrap_servers = \"a:1\"\n[engine]\ncommit_interval_ms = 30001").field,
            "engine.commit_interval_ms"
        );
        // A shorter transaction timeout in the destination properties lowers the bound, the
        // default interval included; a longer one does not raise it.
        let dest = |timeout: u64, engine: &str| {
            format!(
                "[destination]\nbootstrap_servers = \"a:1\"\n[destination.properties]\n\
                 \"transaction.timeout.ms\" = \"{timeout}\"\n[engine]\n{engine}"
            )
        };
        let e = bad(&dest(1500, ""));
        assert_eq!(e.field, "engine.commit_interval_ms");
        assert!(e.to_string().contains("at most 750 ms"), "{e}");
        let good = |toml: &str| resolve(Some(parse_file(toml).unwrap()), &Overrides::default()).unwrap();
        assert_eq!(good(&dest(1500, "commit_interval_ms = 750")).engine.commit_interval, Duration::from_millis(750));
        assert_eq!(bad(&dest(120_000, "commit_interval_ms = 30001")).field, "engine.commit_interval_ms");
        assert_eq!(good(&dest(120_000, "commit_interval_ms = 30000")).engine.commit_interval, Duration::from_secs(30));
        // The default early interval (50 ms) against a shorter commit interval is refused too:
        // the operator learns which of the two to change.
        for engine in ["commit_interval_ms = 40", "commit_interval_ms = 100\nearly_commit_interval_ms = 101"] {
            let e = bad(&format!("[destination]\nbootstrap_servers = \"a:1\"\n[engine]\n{engine}"));
            assert_eq!(e.field, "engine.early_commit_interval_ms", "{engine}");
            assert!(e.to_string().contains("longer than engine.commit_interval_ms"), "{e}");
        }
        assert_eq!(
            bad("listen = \"0.0.0.0:8080\"\n[destination]\nbootstrap_servers = \"a:1\"\n[auth]\nno_auth = true").field,
            "auth.no_auth"
        );
    }
}
