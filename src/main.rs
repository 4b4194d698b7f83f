//! The `kmirror` command line: `serve` runs the mirror engine against a destination cluster.
//! (The REST API, dashboard and `demo` arrive with their issues.)

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "kmirror", version, about = "Cluster mirroring for Apache Kafka (KIP-1279 design)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the mirror engine for a destination cluster until SIGTERM or Ctrl-C.
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Bootstrap servers of the destination cluster (the one kmirror writes to).
    #[arg(long, env = "KMIRROR_DESTINATION_BOOTSTRAP")]
    destination_bootstrap: String,
    /// The state topic.
    #[arg(long, env = "KMIRROR_STATE_TOPIC", default_value = "__mirror_state")]
    state_topic: String,
    /// Partitions of the state topic when kmirror creates it.
    #[arg(long, env = "KMIRROR_STATE_PARTITIONS", default_value_t = 16)]
    state_partitions: i32,
    /// This deployment's id; transactional ids derive from it, so a second instance with the
    /// same id fences the first.
    #[arg(long, env = "KMIRROR_INSTANCE_ID", default_value = "kmirror")]
    instance_id: String,
    /// Commit the data path at least this often (milliseconds).
    #[arg(long, env = "KMIRROR_COMMIT_INTERVAL_MS", default_value_t = 100)]
    commit_interval_ms: u64,
    /// Log format: text or json.
    #[arg(long, env = "KMIRROR_LOG_FORMAT", default_value = "text")]
    log_format: String,
    /// Address the API and dashboard listen on.
    #[arg(long, env = "KMIRROR_LISTEN", default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// A bearer token, as `name:role:token` (role: viewer, operator or admin). Repeatable.
    /// `KMIRROR_ADMIN_TOKEN` adds one admin token for bootstrap.
    #[arg(long = "token", value_name = "NAME:ROLE:TOKEN")]
    tokens: Vec<String>,
    /// Turn authentication off. Accepted only when listening on a loopback address.
    #[arg(long)]
    no_auth: bool,
}

fn parse_token(spec: &str) -> Result<kmirror::auth::TokenEntry, String> {
    let mut it = spec.splitn(3, ':');
    let (Some(name), Some(role), Some(token)) = (it.next(), it.next(), it.next()) else {
        return Err("--token must look like name:role:token".into());
    };
    if name.is_empty() || token.len() < 8 {
        return Err("--token needs a name and a token of at least 8 characters".into());
    }
    Ok(kmirror::auth::TokenEntry { name: name.to_string(), role: role.parse()?, token: token.to_string() })
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rdkafka=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn serve(args: ServeArgs) -> ExitCode {
    let auth = if args.no_auth {
        if !args.listen.ip().is_loopback() {
            tracing::error!("--no-auth is only accepted with a loopback --listen address (got {})", args.listen);
            return ExitCode::from(2);
        }
        tracing::warn!("AUTHENTICATION IS OFF (--no-auth): every caller on this machine is an admin");
        kmirror::auth::TokenStore::disabled()
    } else {
        let mut entries = Vec::new();
        for spec in &args.tokens {
            match parse_token(spec) {
                Ok(e) => entries.push(e),
                Err(e) => {
                    tracing::error!("invalid --token: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        let store = kmirror::auth::TokenStore::new(entries).with_env_admin();
        if store.is_empty() {
            tracing::warn!("no tokens configured: every API call will be refused (add --token or KMIRROR_ADMIN_TOKEN)");
        }
        store
    };
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("cannot listen on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    let mut config = kmirror::engine::EngineConfig::new(args.destination_bootstrap);
    config.state_topic = args.state_topic;
    config.state_partitions = args.state_partitions;
    config.instance_id = args.instance_id;
    config.commit_interval = Duration::from_millis(args.commit_interval_ms.max(1));
    tracing::info!(?config, "starting the mirror engine");
    let (handle, join) = match kmirror::engine::start(config).await {
        Ok(x) => x,
        Err(e) => {
            tracing::error!("cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let state = kmirror::app::AppState {
        engine: handle.clone(),
        auth: std::sync::Arc::new(auth),
        tls: false,
        started_at: std::time::Instant::now(),
    };
    tracing::info!(listen = %args.listen, "serving the API and dashboard");
    if let Err(e) = kmirror::app::serve(listener, state, shutdown_signal()).await {
        tracing::error!("HTTP server failed: {e}");
    }
    tracing::info!("shutting down: aborting open transactions; committed state is final");
    handle.shutdown().await;
    let _ = join.await;
    ExitCode::SUCCESS
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match cli.command {
        Command::Serve(args) => {
            init_logging(&args.log_format);
            runtime.block_on(serve(args))
        }
    }
}
