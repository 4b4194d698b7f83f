//! The client side of `kmirror`: commands that talk to a running `kmirror serve` (any instance of
//! a deployment) over its REST API, the way a script or an operator would with `curl`.
//!
//! - [`http`]: the server (`--url` / `KMIRROR_URL`), the bearer token (`--token-file` /
//!   `KMIRROR_TOKEN`, never a flag value), TLS trust (`--ca-file`) and the error model (RFC 9457
//!   problems) with its exit codes: 0 everything asked succeeded, 1 some items failed, 2 usage,
//!   authentication or connection errors.
//! - [`output`]: tables for people, `--output json` for scripts (the API's own field names).
//! - [`commands`]: mirrors, describe, operations, report, instances.
//! - [`lifecycle`]: `topics start|stop|pause|resume|recover` and `--wait`.
//! - [`apply`]: mirrors as code (`apply`, `export`, `mirrors create -f`).
//!
//! Responses are read into this module's own small structs ([`types`]), never into the server's
//! types, so the client stays a client; a test checks those structs against the committed
//! OpenAPI document, and the integration tests run every command against `kmirror serve`.

pub mod apply;
pub mod commands;
pub mod http;
pub mod lifecycle;
pub mod output;
pub mod safety;
pub mod types;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use output::Format;

/// Where the server is and how to talk to it. Accepted by every client command (before or after
/// its subcommand).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server")]
pub struct Conn {
    /// The kmirror server's URL (any instance of the deployment).
    #[arg(long, env = "KMIRROR_URL", default_value = "http://127.0.0.1:8080", global = true)]
    pub url: String,
    /// A file whose first line is the bearer token. Without it, the token is read from the
    /// KMIRROR_TOKEN environment variable; it is never given as a flag value.
    #[arg(long, env = "KMIRROR_TOKEN_FILE", value_name = "FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// PEM file of the CA certificate(s) that sign the server's certificate (for https URLs).
    #[arg(long, env = "KMIRROR_CA_FILE", value_name = "FILE", global = true)]
    pub ca_file: Option<PathBuf>,
    /// `table` for people, `json` for scripts (the API's field names).
    #[arg(long, value_enum, default_value_t = Format::Table, global = true)]
    pub output: Format,
    /// How long one HTTP request may take (e.g. `30s`, `2m`).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration, global = true)]
    pub request_timeout: std::time::Duration,
}

/// The client commands (`kmirror <command>` beside `serve`, `demo` and `openapi`).
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Mirror definitions: list, describe, create, delete.
    Mirrors(MirrorsArgs),
    /// Topic lifecycle: start, stop (failover), pause, resume, recover.
    Topics(TopicsArgs),
    /// A mirror's partitions with offsets, lag and state (the KIP's columns).
    Describe(DescribeArgs),
    /// A recorded operation and its per-partition progress.
    Operations(OperationsArgs),
    /// A mirror's incident report (Markdown; `--output json` for the JSON form).
    Report(ReportArgs),
    /// The kmirror instances sharing the work and the slots each owns.
    Instances(InstancesArgs),
    /// Make the server's mirrors what a file says (mirrors as code): print the diff, then apply it.
    Apply(apply::ApplyArgs),
    /// Write today's mirrors in the `apply` file format (TOML) to standard output.
    Export(apply::ExportArgs),
    /// Two-person approval: list requests, approve or reject them.
    Approvals(safety::ApprovalsArgs),
    /// DR drills: run one on a canary topic, list them, print a report.
    Drills(safety::DrillsArgs),
}

#[derive(Debug, Args)]
pub struct MirrorsArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(subcommand)]
    pub command: MirrorsCommand,
}

#[derive(Debug, Subcommand)]
pub enum MirrorsCommand {
    /// Every mirror: topics, partitions, lag, source cluster.
    List,
    /// One mirror's definition and health summary.
    Describe {
        /// The mirror's name.
        mirror: String,
    },
    /// Create the mirrors a file defines (the `apply` format; each must not exist yet).
    Create {
        /// A mirrors file (TOML, see `kmirror apply --help`).
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: PathBuf,
    },
    /// Delete a mirror (refused by the server while one of its topics is not STOPPED).
    Delete {
        /// The mirror's name.
        mirror: String,
        /// Why (required when the mirror's approval policy covers deletes).
        #[arg(long)]
        reason: Option<String>,
        /// Admin only: delete it now although the policy wants a second person (with --reason).
        #[arg(long)]
        break_glass: bool,
    },
}

#[derive(Debug, Args)]
pub struct TopicsArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(subcommand)]
    pub command: TopicsCommand,
}

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Start mirroring topics (also restarts STOPPED ones: failback).
    Start(StartArgs),
    /// Stop mirroring topics: they become writable on the destination (failover).
    Stop(StopArgs),
    /// Pause mirroring (the topics stay read-only mirrors).
    Pause(LifecycleArgs),
    /// Resume paused topics.
    Resume(LifecycleArgs),
    /// Retry the topics' FAILED partitions now.
    Recover(LifecycleArgs),
}

/// The selection and flags every lifecycle command takes.
#[derive(Debug, Clone, Args)]
pub struct LifecycleArgs {
    /// The mirror's name.
    #[arg(long)]
    pub mirror: String,
    /// Comma-separated topic names and/or regexes (matched against whole names). A name is
    /// made of letters, digits, `.`, `_` and `-` only; anything else is a regex.
    #[arg(long, value_name = "LIST-OR-REGEX", required_unless_present = "all", conflicts_with = "all")]
    pub topics: Option<String>,
    /// Comma-separated regexes of topics to leave out (applied by this client: it asks the
    /// server which topics the selection matches, then sends the remaining names).
    #[arg(long, value_name = "REGEX")]
    pub exclude: Option<String>,
    /// Every topic of the mirror, however many (stop, pause, resume, recover).
    #[arg(long)]
    pub all: bool,
    /// Only check whether the call would be accepted; change nothing.
    #[arg(long)]
    pub validate_only: bool,
    /// Wait until every partition reached the operation's target state.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this long (e.g. `90s`, `5m`); exit code 1.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration, requires = "wait")]
    pub timeout: std::time::Duration,
    /// Why: required when the mirror's approval policy covers the call (a failover, a resync),
    /// which then waits for a second person.
    #[arg(long)]
    pub reason: Option<String>,
    /// Admin only: run a call the approval policy covers now, without a second person (with
    /// --reason; recorded).
    #[arg(long)]
    pub break_glass: bool,
}

#[derive(Debug, Clone, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub common: LifecycleArgs,
    /// `resync`: delete destination records past the last stop point and mirror again from the
    /// source's log start (`none`: refuse, DESTINATION_DIVERGED).
    #[arg(long, value_enum, default_value_t = Truncation::None)]
    pub truncation: Truncation,
    /// With `--truncation resync`: first copy the divergent records to `<topic>.kmirror-diverged`.
    #[arg(long)]
    pub quarantine: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Truncation {
    None,
    Resync,
}

#[derive(Debug, Clone, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub common: LifecycleArgs,
    /// Planned switch-over: stop only once every selected partition has caught up with a
    /// reachable source; if the timeout passes first, nothing is stopped and the partitions still
    /// behind are listed (exit 1). Stop the producers on the source first.
    #[arg(long)]
    pub promote: bool,
    /// With --promote: how long the server waits for the partitions to catch up, at most 10m [server default: 60s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "promote")]
    pub promote_timeout: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// The mirror's name.
    #[arg(long)]
    pub mirror: String,
    /// Only this topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// Only FAILED partitions, with RETRY and ERROR columns.
    #[arg(long)]
    pub failed: bool,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Debug, Args)]
pub struct OperationsArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(subcommand)]
    pub command: OperationsCommand,
}

#[derive(Debug, Subcommand)]
pub enum OperationsCommand {
    /// One operation: who asked what, per-topic results, per-partition progress.
    Show {
        /// The operation's ID (printed by the lifecycle commands).
        id: String,
        /// Wait (with a progress bar) until every partition reached the target state.
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this long; exit code 1.
        #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration, requires = "wait")]
        timeout: std::time::Duration,
    },
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The mirror's name.
    pub mirror: String,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Debug, Args)]
pub struct InstancesArgs {
    #[command(flatten)]
    pub conn: Conn,
}

/// `90`, `90s`, `1500ms`, `5m`, `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("{s:?} is not a duration (e.g. 30s, 5m, 1500ms)"))?;
    let ms = match unit.trim() {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        other => return Err(format!("unknown unit {other:?} in {s:?} (ms, s, m or h)")),
    };
    ms.map(std::time::Duration::from_millis).ok_or_else(|| format!("{s:?} is too long"))
}

/// Runs one client command to its exit code.
pub async fn run(command: ClientCommand) -> ExitCode {
    let result = match command {
        ClientCommand::Mirrors(a) => commands::mirrors(a).await,
        ClientCommand::Topics(a) => lifecycle::run(a).await,
        ClientCommand::Describe(a) => commands::describe(a).await,
        ClientCommand::Operations(a) => commands::operations(a).await,
        ClientCommand::Report(a) => commands::report(a).await,
        ClientCommand::Instances(a) => commands::instances(a).await,
        ClientCommand::Apply(a) => apply::apply(a).await,
        ClientCommand::Export(a) => apply::export(a).await,
        ClientCommand::Approvals(a) => safety::approvals(a).await,
        ClientCommand::Drills(a) => safety::drills(a).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            failure.report();
            ExitCode::from(failure.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "s", "5d", "-1s", "1.5s", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
