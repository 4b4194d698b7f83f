//! What can happen to a mirror partition: operator requests and engine reports.

use std::fmt;

use super::backoff::Jitter;
use super::error_code::ErrorCode;
use super::record::{MirrorPosition, StopPoint, Truncation};

/// An input to [`transition`](super::transition()).
///
/// Operator requests: `Start`, `Pause`, `Resume`, `Stop`, `Recover`, `Remove`. Engine reports (the outcome
/// of the actions of an earlier step, or engine life-cycle): `Prepared`, `Paused`, `Progress`,
/// `Stopped`, `Error`, `Retry`, `RetryEarly`, `Loaded`.
///
/// There is no separate restart event: `Start` on a STOPPED partition *is* the restart (the seed's
/// STOPPED → PREPARING, "the mirror.name config is set again"), with the same truncation choice
/// as a first start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Start mirroring (from UNKNOWN), or restart it in the same direction (from STOPPED).
    Start {
        /// What to do about destination records in the way.
        truncation: Truncation,
    },
    /// PREPARING finished: mirroring starts at `start`.
    Prepared {
        /// The first source offset (and its leader epoch, for KIP-320 validation) to fetch, and
        /// the destination end offset that mirrored records will follow.
        start: MirrorPosition,
    },
    /// Pause mirroring.
    Pause,
    /// PAUSING finished: the open transaction committed and its progress was reported.
    Paused,
    /// Resume a paused (or pausing) partition.
    Resume,
    /// A destination transaction carrying this partition's records committed.
    Progress {
        /// The new committed position.
        position: MirrorPosition,
    },
    /// Stop mirroring (failover): the topic becomes an ordinary writable topic.
    Stop,
    /// STOPPING finished.
    Stopped {
        /// The stop point the engine persisted (`LastMirrorEpochs` and the fenced end offset).
        stop: StopPoint,
    },
    /// Something went wrong with this partition.
    Error {
        /// The classified cause.
        code: ErrorCode,
        /// Details for operators.
        message: String,
        /// Where in its range the retry delay falls, if this failure schedules a retry.
        jitter: Jitter,
    },
    /// The retry timer of a FAILED partition fired.
    Retry,
    /// The cluster whose silence failed a FAILED partition answers again before its retry is
    /// due: the retry runs now (an attempt like any other; the partition must have attempts left).
    RetryEarly,
    /// An operator retries a FAILED partition now (KIP-1279's `RecoverMirrorTopics`): whatever
    /// its error, however many automatic retries it used and whenever the next was due, it goes
    /// back to what it was doing with its retry count reset. Its checks run again, so a cause
    /// that was not fixed fails it again.
    Recover,
    /// Remove the topic from the mirror (from STOPPED or FAILED).
    Remove,
    /// The engine loaded this record (at startup or when it took over the partition's state
    /// partition) and takes the partition over: the seed's read path, where "a partition found in
    /// STOPPING re-runs the stop sequence". Accepting it bumps the state epoch, which fences the
    /// previous owner.
    Loaded,
}

impl Event {
    /// A [`Event::Error`].
    #[must_use]
    pub fn error(code: ErrorCode, message: impl Into<String>, jitter: Jitter) -> Self {
        Self::Error { code, message: message.into(), jitter }
    }

    /// The event's kind, without its data.
    #[must_use]
    pub const fn kind(&self) -> EventKind {
        match self {
            Self::Start { .. } => EventKind::Start,
            Self::Prepared { .. } => EventKind::Prepared,
            Self::Pause => EventKind::Pause,
            Self::Paused => EventKind::Paused,
            Self::Resume => EventKind::Resume,
            Self::Progress { .. } => EventKind::Progress,
            Self::Stop => EventKind::Stop,
            Self::Stopped { .. } => EventKind::Stopped,
            Self::Error { .. } => EventKind::Error,
            Self::Retry => EventKind::Retry,
            Self::RetryEarly => EventKind::RetryEarly,
            Self::Recover => EventKind::Recover,
            Self::Remove => EventKind::Remove,
            Self::Loaded => EventKind::Loaded,
        }
    }
}

/// The kind of an [`Event`]: the column of the transition table ([`rule`](super::rule)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// [`Event::Start`]
    Start,
    /// [`Event::Prepared`]
    Prepared,
    /// [`Event::Pause`]
    Pause,
    /// [`Event::Paused`]
    Paused,
    /// [`Event::Resume`]
    Resume,
    /// [`Event::Progress`]
    Progress,
    /// [`Event::Stop`]
    Stop,
    /// [`Event::Stopped`]
    Stopped,
    /// [`Event::Error`]
    Error,
    /// [`Event::Retry`]
    Retry,
    /// [`Event::RetryEarly`]
    RetryEarly,
    /// [`Event::Recover`]
    Recover,
    /// [`Event::Remove`]
    Remove,
    /// [`Event::Loaded`]
    Loaded,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [Self; 14] = [
        Self::Start,
        Self::Prepared,
        Self::Pause,
        Self::Paused,
        Self::Resume,
        Self::Progress,
        Self::Stop,
        Self::Stopped,
        Self::Error,
        Self::Retry,
        Self::RetryEarly,
        Self::Recover,
        Self::Remove,
        Self::Loaded,
    ];

    /// The lower-case name used in messages ("pause is valid from MIRRORING only").
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Prepared => "prepared",
            Self::Pause => "pause",
            Self::Paused => "paused",
            Self::Resume => "resume",
            Self::Progress => "progress",
            Self::Stop => "stop",
            Self::Stopped => "stopped",
            Self::Error => "error",
            Self::Retry => "retry",
            Self::RetryEarly => "retry_early",
            Self::Recover => "recover",
            Self::Remove => "remove",
            Self::Loaded => "loaded",
        }
    }

    /// The verb phrase for "cannot {verb} a partition in state …".
    #[must_use]
    pub const fn verb(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Prepared => "complete preparation of",
            Self::Pause => "pause",
            Self::Paused => "complete the pause of",
            Self::Resume => "resume",
            Self::Progress => "record progress for",
            Self::Stop => "stop",
            Self::Stopped => "complete the stop of",
            Self::Error => "record an error for",
            Self::Retry => "retry",
            Self::RetryEarly => "retry early",
            Self::Recover => "recover",
            Self::Remove => "remove",
            Self::Loaded => "take over",
        }
    }

    /// Whether an operator asks for this (as opposed to the engine reporting it).
    #[must_use]
    pub const fn is_request(self) -> bool {
        matches!(self, Self::Start | Self::Pause | Self::Resume | Self::Stop | Self::Recover | Self::Remove)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
