//! The data path's two clients over librdkafka (`data_path::ports`): the source reader
//! ([`source::Source`], one `read_committed` consumer with manual assignment) and the
//! transactional writer ([`destination::Destination`], one transactional producer), and the
//! thread that runs the engine's loop over them.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use tokio::sync::mpsc;

use super::KafkaAdmin;
use super::client::{ClientKind, client_config, sets_property};
use super::error::{KafkaError, KafkaErrorKind, KafkaResult};
use crate::data_path::{self, EncodeProgress, PipeCommand, PipeConfig, PipeEvent, TxnError, TxnErrorKind};

mod config;
mod destination;
mod shared;
mod source;
#[cfg(test)]
mod tests;

pub use self::config::prefetch_kbytes;
use self::config::*;
use self::destination::Destination;
pub use self::destination::first_committed_from;
use self::source::Source;

/// Starts a slot's data path on its own thread. Returns the command sender; events arrive on
/// `events`.
pub fn spawn(
    config: PipeConfig,
    encode: EncodeProgress,
    events: mpsc::UnboundedSender<PipeEvent>,
    runtime: tokio::runtime::Handle,
) -> std::io::Result<(std::sync::mpsc::Sender<PipeCommand>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let name = format!("pipe-{}-{}", config.mirror, config.slot);
    let handle = std::thread::Builder::new().name(name).spawn(move || match open(&config, &runtime) {
        Ok((source, writer)) => data_path::run(data_path::Pipe::new(config, encode, events, source, writer), rx),
        Err(e) => {
            let _ = events.send(PipeEvent::Failed { message: e.to_string() });
            // Answer pending commands so no caller waits forever.
            for cmd in rx.iter() {
                data_path::reject(cmd, "the mirror's data path could not start");
            }
        }
    })?;
    Ok((tx, handle))
}

/// The two clients of a data path. The writer's init fences any earlier writer with the same
/// transactional id (and aborts its open transaction) before this one writes anything.
fn open(config: &PipeConfig, runtime: &tokio::runtime::Handle) -> Result<(Source, Destination), StartError> {
    // Shared with the mirror's other slot data paths (and other mirrors on the same clusters):
    // they are used for a few offset look-ups, not worth a client per data path.
    let destination_admin =
        KafkaAdmin::shared(&config.destination_bootstrap, &config.destination_properties, Duration::from_secs(15))
            .map_err(StartError::Admin)?;
    let source_admin = KafkaAdmin::shared(&config.source_bootstrap, &config.source_properties, Duration::from_secs(15))
        .map_err(StartError::Admin)?;
    let source = Source::new(config, source_admin, runtime.clone())?;
    let writer = Destination::new(config, destination_admin, runtime.clone())?;
    Ok((source, writer))
}

/// Why a data path could not start (reported as [`PipeEvent::Failed`]).
#[derive(Debug, Clone, thiserror::Error)]
enum StartError {
    #[error("cannot create source consumer: {0}")]
    SourceConsumer(KafkaError),
    #[error("cannot create destination producer: {0}")]
    Producer(KafkaError),
    #[error("cannot initialise transactions on the destination: {0}")]
    InitTransactions(RdError),
    /// The admin client of one of the clusters (shared with the mirror's other data paths).
    #[error("{0}")]
    Admin(KafkaError),
}

/// Why the source consumer did not take partitions.
#[derive(Debug, Clone, thiserror::Error)]
enum AssignError {
    /// The positions do not make a partition list (a topic name with a NUL byte).
    #[error("{0}")]
    Positions(KafkaError),
    #[error("{0}")]
    Consumer(RdError),
}

/// Why the outcome of a commit in doubt could not be learned (yet).
#[derive(Debug, Clone, thiserror::Error)]
enum OutcomeError {
    #[error("cannot create the outcome reader: {0}")]
    Reader(KafkaError),
    #[error("{0}")]
    Position(RdError),
    #[error("cannot read the destination: {0}")]
    Assign(RdError),
    #[error("cannot learn the outcome of the commit in doubt (reading {topic}-{partition} at {offset})")]
    NoAnswer { topic: String, partition: i32, offset: i64 },
}
