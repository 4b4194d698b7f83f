//! The `kmirror` command line: `serve` (engine + API + dashboard for a destination cluster),
//! `demo` (everything on embedded mock clusters), `openapi` (print the API spec), and the client
//! commands that drive a running server over its REST API (`mirrors`, `topics`, `describe`,
//! `operations`, `report`, `instances`, `apply`, `export`; see `cli` and docs/cli.md).

mod cli;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "kmirror", version, about = "Cluster mirroring for Apache Kafka (KIP-1279 design)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
// Parsed once at startup: the size of the serve variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Run the mirror engine for a destination cluster until SIGTERM or Ctrl-C.
    Serve(ServeArgs),
    /// Print the REST API's OpenAPI document (`kmirror openapi > openapi/openapi.json`).
    Openapi,
    /// Run everything on this machine with no Kafka installed: two in-process mock clusters, a
    /// demo mirror with live traffic, and the dashboard and API.
    Demo(DemoArgs),
    /// Keys for secrets at rest.
    #[command(subcommand)]
    Secrets(SecretsCommand),
    #[command(flatten)]
    Client(cli::ClientCommand),
    /// Print a shell completion script (e.g. `kmirror completions bash > /etc/bash_completion.d/kmirror`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
enum SecretsCommand {
    /// Write a new key for `[secrets] key_file` (32 random bytes, base64): to FILE (created with
    /// mode 0600, never overwritten), or to standard output.
    GenerateKey {
        /// Where to write the key.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
    },
}

/// How kmirror logs (both `serve` and `demo`).
#[derive(clap::Args)]
struct LogArgs {
    /// Which log lines to write: a level (`error`, `warn`, `info`, `debug`, `trace`) or a filter
    /// like `info,kmirror::engine=debug`. Wins over `RUST_LOG` [default: `RUST_LOG`, else
    /// `info,rdkafka=warn`].
    #[arg(long, env = "KMIRROR_LOG_LEVEL", value_name = "FILTER")]
    log_level: Option<String>,
    /// Colour text logs with ANSI codes: `auto` (only when stderr is a terminal and `NO_COLOR`
    /// is not set), `always` or `never`. JSON logs are never coloured.
    #[arg(long, env = "KMIRROR_LOG_COLOR", value_enum, default_value_t = LogColor::Auto)]
    log_color: LogColor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogColor {
    Auto,
    Always,
    Never,
}

#[derive(clap::Args)]
struct DemoArgs {
    /// Address the dashboard and API listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// Records per second produced to the demo source.
    #[arg(long, default_value_t = 50)]
    rate: u32,
    /// The demo's bearer token, at least 32 characters (random when not given).
    #[arg(long, env = "KMIRROR_DEMO_TOKEN")]
    token: Option<String>,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file (see kmirror.example.toml). Flags and KMIRROR_* variables override it.
    #[arg(long, env = "KMIRROR_CONFIG")]
    config: Option<std::path::PathBuf>,
    /// Print the effective configuration (secrets redacted) and exit.
    #[arg(long)]
    check_config: bool,
    /// Bootstrap servers of the destination cluster (the one kmirror writes to).
    #[arg(long, env = "KMIRROR_DESTINATION_BOOTSTRAP")]
    destination_bootstrap: Option<String>,
    /// The state topic [default: __mirror_state].
    #[arg(long, env = "KMIRROR_STATE_TOPIC")]
    state_topic: Option<String>,
    /// Partitions of the state topic when kmirror creates it [default: 16].
    #[arg(long, env = "KMIRROR_STATE_PARTITIONS")]
    state_partitions: Option<i32>,
    /// Names the deployment: every instance with the same cluster name on the same destination
    /// shares the mirrors' work [default: kmirror].
    #[arg(long, env = "KMIRROR_CLUSTER_NAME")]
    cluster_name: Option<String>,
    /// Names this instance within the deployment (static group membership: a restart with the
    /// same id keeps its slots); a second process with the same id fences the first [default:
    /// the host name].
    #[arg(long, env = "KMIRROR_INSTANCE_ID")]
    instance_id: Option<String>,
    /// `group` (share slots with every instance of the cluster name) or `standalone` (own every
    /// slot, no consumer group) [default: group].
    #[arg(long, env = "KMIRROR_MEMBERSHIP")]
    membership: Option<String>,
    /// An instance silent for this long loses its slots to the others, in milliseconds [default: 10000].
    #[arg(long, env = "KMIRROR_SESSION_TIMEOUT_MS")]
    session_timeout_ms: Option<u64>,
    /// This instance's API address as the other instances and the Instances page show it.
    #[arg(long, env = "KMIRROR_ADVERTISED_URL")]
    advertised_url: Option<String>,
    /// Under a backlog, a data path commits when its transaction is this old, in milliseconds
    /// [default: 1000; at most 30000 and half the destination's transaction.timeout.ms].
    #[arg(long, env = "KMIRROR_COMMIT_INTERVAL_MS")]
    commit_interval_ms: Option<u64>,
    /// A data path that keeps up commits as soon as it has caught up, at most once per this many
    /// milliseconds [default: 50].
    #[arg(long, env = "KMIRROR_EARLY_COMMIT_INTERVAL_MS")]
    early_commit_interval_ms: Option<u64>,
    /// Metadata (cluster ID, configs, groups, ACLs) refresh interval, in milliseconds [default: 30000].
    #[arg(long, env = "KMIRROR_METADATA_REFRESH_INTERVAL_MS")]
    metadata_refresh_interval_ms: Option<u64>,
    /// Log format: text or json [default: text].
    #[arg(long, env = "KMIRROR_LOG_FORMAT")]
    log_format: Option<String>,
    /// Address the API and dashboard listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "KMIRROR_LISTEN")]
    listen: Option<String>,
    /// A bearer token, as `name:role:token` (role: viewer, operator or admin; the token at least
    /// 32 characters, e.g. `openssl rand -hex 32`). Repeatable. Visible to other users in `ps`:
    /// prefer --token-file or KMIRROR_<ROLE>_TOKEN.
    #[arg(long = "token", value_name = "NAME:ROLE:TOKEN")]
    tokens: Vec<String>,
    /// A bearer token read from a file, as `name:role:/path` (the file holds the token, a trailing
    /// line break is ignored). Repeatable. KMIRROR_VIEWER_TOKEN, KMIRROR_OPERATOR_TOKEN and
    /// KMIRROR_ADMIN_TOKEN (or their _FILE variants, naming a file) add one token of that role.
    #[arg(long = "token-file", value_name = "NAME:ROLE:PATH")]
    token_files: Vec<String>,
    /// Turn authentication off. Accepted only when listening on a loopback address; requests
    /// must then be addressed to a loopback `Host` (and come from no other `Origin`).
    #[arg(long)]
    no_auth: bool,
    /// The key that encrypts secret property values in the state topic (32 random bytes,
    /// base64; `kmirror secrets generate-key`). Every instance of a deployment needs the same.
    #[arg(long, env = "KMIRROR_SECRETS_KEY_FILE")]
    secrets_key_file: Option<std::path::PathBuf>,
    /// The key before a rotation: what it encrypted still decrypts, and is encrypted under the
    /// new key on its next write.
    #[arg(long, env = "KMIRROR_SECRETS_PREVIOUS_KEY_FILE")]
    secrets_previous_key_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    log: LogArgs,
}

/// Loads and validates the configuration; an error names the field (exit code 2).
fn load_config(args: &ServeArgs) -> Result<kmirror::config::ServeConfig, kmirror::config::ConfigError> {
    let file = match &args.config {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| kmirror::config::ConfigError {
                field: "config".into(),
                message: format!("cannot read {}: {e}", path.display()),
            })?;
            Some(kmirror::config::parse_file(&text)?)
        }
    };
    let overrides = kmirror::config::Overrides {
        listen: args.listen.clone(),
        log_format: args.log_format.clone(),
        destination_bootstrap: args.destination_bootstrap.clone(),
        state_topic: args.state_topic.clone(),
        state_partitions: args.state_partitions,
        cluster_name: args.cluster_name.clone(),
        instance_id: args.instance_id.clone(),
        membership: args.membership.clone(),
        session_timeout_ms: args.session_timeout_ms,
        advertised_url: args.advertised_url.clone(),
        commit_interval_ms: args.commit_interval_ms,
        early_commit_interval_ms: args.early_commit_interval_ms,
        metadata_refresh_interval_ms: args.metadata_refresh_interval_ms,
        tokens: args.tokens.clone(),
        token_files: args.token_files.clone(),
        role_token_env: role_token_env()?,
        no_auth: args.no_auth,
        secrets_key_file: args.secrets_key_file.clone(),
        secrets_previous_key_file: args.secrets_previous_key_file.clone(),
    };
    kmirror::config::resolve(file, &overrides)
}

/// The set `KMIRROR_<ROLE>_TOKEN` and `KMIRROR_<ROLE>_TOKEN_FILE` variables.
fn role_token_env() -> Result<std::collections::BTreeMap<String, String>, kmirror::config::ConfigError> {
    let mut found = std::collections::BTreeMap::new();
    for var in kmirror::config::role_token_variables() {
        match std::env::var(&var) {
            Ok(value) => {
                found.insert(var, value);
            }
            Err(std::env::VarError::NotPresent) => {}
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(kmirror::config::ConfigError { field: var, message: "is not valid UTF-8".into() });
            }
        }
    }
    Ok(found)
}

/// The log filter: `--log-level` (`KMIRROR_LOG_LEVEL`), else `RUST_LOG`, else
/// `info,rdkafka=warn`. An invalid filter is an error naming the flag.
fn log_filter(level: Option<&str>) -> Result<tracing_subscriber::EnvFilter, String> {
    use tracing_subscriber::EnvFilter;
    match level {
        Some(l) => EnvFilter::try_new(l).map_err(|e| format!("invalid configuration: log-level: {l:?}: {e}")),
        None => Ok(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rdkafka=warn"))),
    }
}

/// Whether text logs carry ANSI colour codes: never into a file or pipe unless asked for.
fn log_ansi(color: LogColor) -> bool {
    use std::io::IsTerminal;
    match color {
        LogColor::Always => true,
        LogColor::Never => false,
        LogColor::Auto => std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    }
}

fn init_logging(format: &str, log: &LogArgs) -> Result<(), String> {
    let filter = log_filter(log.log_level.as_deref())?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if format == "json" {
        builder.json().with_ansi(false).init();
    } else {
        builder.with_ansi(log_ansi(log.log_color)).init();
    }
    Ok(())
}

async fn serve(config: kmirror::config::ServeConfig) -> ExitCode {
    let run_config = match kmirror::app::RunConfig::from_serve(&config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kmirror: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("cannot listen on {}: {e}", config.listen);
            return ExitCode::FAILURE;
        }
    };
    // Listen for SIGTERM / Ctrl-C before the (possibly long) engine start: a signal that arrives
    // meanwhile is kept and ends the server as soon as it runs, with a clean exit, instead of
    // the default action killing the process.
    let shutdown = shutdown_signal();
    tracing::info!(?config, "configuration");
    match kmirror::app::run(listener, run_config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(kmirror::app::RunError::Engine(e @ kmirror::engine::EngineError::Incompatible(_))) => {
            // A configuration problem like an invalid field: the same exit code.
            eprintln!("kmirror: {e}");
            tracing::error!("{e}");
            ExitCode::from(2)
        }
        Err(e @ kmirror::app::RunError::Http(_)) => {
            // The engine was shut down cleanly all the same.
            tracing::error!("{e}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGTERM or SIGINT. The handlers are installed when this is called (not when the
/// future is first polled), so signals from then on are never lost.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("signal handler");
        let mut int = signal(SignalKind::interrupt()).expect("signal handler");
        async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn main() -> ExitCode {
    // Before any thread starts (tokio's workers, librdkafka's): see the function.
    kmirror::kafka::limit_malloc_arenas();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match cli.command {
        Command::Serve(args) => {
            let config = match load_config(&args) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("kmirror: {e}");
                    return ExitCode::from(2);
                }
            };
            if args.check_config {
                for w in &config.warnings {
                    eprintln!("kmirror: warning: {w}");
                }
                println!("{config:#?}");
                return ExitCode::SUCCESS;
            }
            let format = match config.log_format {
                kmirror::config::LogFormat::Json => "json",
                kmirror::config::LogFormat::Text => "text",
            };
            if let Err(e) = init_logging(format, &args.log) {
                eprintln!("kmirror: {e}");
                return ExitCode::from(2);
            }
            for w in &config.warnings {
                tracing::warn!("{w}");
            }
            runtime.block_on(serve(config))
        }
        Command::Demo(args) => {
            if let Some(Err(e)) = args.token.as_deref().map(|t| kmirror::auth::check_token_strength("demo", t)) {
                eprintln!("kmirror: invalid configuration: token: {e}");
                return ExitCode::from(2);
            }
            if let Err(e) = init_logging("text", &args.log) {
                eprintln!("kmirror: {e}");
                return ExitCode::from(2);
            }
            let options =
                kmirror::demo::DemoOptions { listen: args.listen, rate_per_sec: args.rate, token: args.token };
            // Inside the runtime: the signal handlers need its reactor.
            match runtime.block_on(async { kmirror::demo::run(options, shutdown_signal()).await }) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("kmirror demo: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Openapi => {
            print!("{}", kmirror::api::openapi_json());
            ExitCode::SUCCESS
        }
        Command::Secrets(SecretsCommand::GenerateKey { output }) => generate_key(output.as_deref()),
        Command::Client(command) => runtime.block_on(cli::run(command)),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "kmirror", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}

fn generate_key(output: Option<&std::path::Path>) -> ExitCode {
    let (key, text) = kmirror::store::seal::SecretKey::generate();
    let Some(path) = output else {
        println!("{text}");
        return ExitCode::SUCCESS;
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written =
        options.open(path).and_then(|mut f| std::io::Write::write_all(&mut f, format!("{text}\n").as_bytes()));
    match written {
        Ok(()) => {
            eprintln!("kmirror: wrote a new secrets key (id {}) to {}", key.id(), path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kmirror: cannot write {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}
