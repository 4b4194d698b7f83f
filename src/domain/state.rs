//! The seed's per-partition states, and the roll-up of a topic's partition states.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a mirror partition is in its lifecycle (KIP-1279 seed states).
///
/// See [`transition`](super::transition()) for the edges between them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PartitionState {
    /// No record yet, the state store is still loading, or the topic was removed from the mirror.
    #[default]
    Unknown,
    /// Checking identities, ensuring the destination topic and computing the start position.
    Preparing,
    /// Assigned to the mirror fetcher; records flow in transactions.
    Mirroring,
    /// Unassigned; the open transaction is being committed.
    Pausing,
    /// No fetching; the topic stays a mirror.
    Paused,
    /// Running the stop (failover) sequence.
    Stopping,
    /// An ordinary writable topic; the stop point is recorded.
    Stopped,
    /// An error stopped the partition; see its record for the cause and retry schedule.
    Failed,
}

impl PartitionState {
    /// Every state, in lifecycle order.
    pub const ALL: [Self; 8] = [
        Self::Unknown,
        Self::Preparing,
        Self::Mirroring,
        Self::Pausing,
        Self::Paused,
        Self::Stopping,
        Self::Stopped,
        Self::Failed,
    ];

    /// The stable `SCREAMING_SNAKE_CASE` name (also the serde and `Display` form).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "UNKNOWN",
            Self::Preparing => "PREPARING",
            Self::Mirroring => "MIRRORING",
            Self::Pausing => "PAUSING",
            Self::Paused => "PAUSED",
            Self::Stopping => "STOPPING",
            Self::Stopped => "STOPPED",
            Self::Failed => "FAILED",
        }
    }

    /// Whether the state only lasts while the engine carries out its actions (PREPARING,
    /// PAUSING, STOPPING). An engine that restarts finds such a state and runs its actions again
    /// (see [`Event::Loaded`](super::Event::Loaded)).
    #[must_use]
    pub const fn is_transient(self) -> bool {
        matches!(self, Self::Preparing | Self::Pausing | Self::Stopping)
    }

    /// Position along the lifecycle UNKNOWN → PREPARING → MIRRORING → PAUSING → PAUSED →
    /// STOPPING → STOPPED, used by [`roll_up`]. FAILED is off the line (it always wins).
    const fn lifecycle_rank(self) -> u8 {
        match self {
            Self::Unknown => 0,
            Self::Preparing => 1,
            Self::Mirroring => 2,
            Self::Pausing => 3,
            Self::Paused => 4,
            Self::Stopping => 5,
            Self::Stopped => 6,
            Self::Failed => 7,
        }
    }
}

impl fmt::Display for PartitionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`PartitionState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown partition state {0:?} (expected one of UNKNOWN, PREPARING, MIRRORING, PAUSING, PAUSED, STOPPING, STOPPED, FAILED)"
)]
pub struct UnknownPartitionState(pub String);

impl FromStr for PartitionState {
    type Err = UnknownPartitionState;

    /// Parses the `SCREAMING_SNAKE_CASE` name, ignoring ASCII case (for API filters).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownPartitionState(s.to_owned()))
    }
}

/// The state of a topic, rolled up from its partitions' states.
///
/// Rules, in order:
/// 1. no partitions → UNKNOWN;
/// 2. any partition FAILED → FAILED (a failure is never hidden behind healthy partitions);
/// 3. otherwise the *least advanced* state along the lifecycle UNKNOWN → PREPARING → MIRRORING
///    → PAUSING → PAUSED → STOPPING → STOPPED, i.e. the furthest state that **every** partition
///    has reached. All partitions in one state therefore roll up to that state, a topic whose
///    partitions are PAUSED and PAUSING is PAUSING, and a topic that is half STOPPED and half
///    MIRRORING still counts as MIRRORING (it is not yet safe to write to).
///
/// [`StateCounts`] keeps the per-state counts for displays such as "3 of 12 PAUSING".
#[must_use]
pub fn roll_up<I>(states: I) -> PartitionState
where
    I: IntoIterator<Item = PartitionState>,
{
    states.into_iter().collect::<StateCounts>().roll_up()
}

/// How many partitions of a topic are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StateCounts([usize; 8]);

impl StateCounts {
    /// Partitions in `state`.
    #[must_use]
    pub const fn count(&self, state: PartitionState) -> usize {
        self.0[state.lifecycle_rank() as usize]
    }

    /// All partitions counted.
    #[must_use]
    pub fn total(&self) -> usize {
        self.0.iter().sum()
    }

    /// Adds one partition in `state`.
    pub fn add(&mut self, state: PartitionState) {
        self.0[state.lifecycle_rank() as usize] += 1;
    }

    /// Whether the partitions are in more than one state.
    #[must_use]
    pub fn is_mixed(&self) -> bool {
        self.0.iter().filter(|&&n| n > 0).count() > 1
    }

    /// The rolled-up state; see [`roll_up`] for the rules.
    #[must_use]
    pub fn roll_up(&self) -> PartitionState {
        if self.count(PartitionState::Failed) > 0 {
            return PartitionState::Failed;
        }
        PartitionState::ALL.into_iter().find(|&state| self.count(state) > 0).unwrap_or(PartitionState::Unknown)
    }
}

impl FromIterator<PartitionState> for StateCounts {
    fn from_iter<I: IntoIterator<Item = PartitionState>>(iter: I) -> Self {
        let mut counts = Self::default();
        for state in iter {
            counts.add(state);
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::PartitionState::*;
    use super::*;

    #[test]
    fn serde_display_and_from_str_agree_on_screaming_snake_case() {
        for state in PartitionState::ALL {
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{state}\""));
            assert_eq!(serde_json::from_str::<PartitionState>(&json).unwrap(), state);
            assert_eq!(state.as_str().parse::<PartitionState>(), Ok(state));
            assert_eq!(state.as_str().to_lowercase().parse::<PartitionState>(), Ok(state));
        }
        assert_eq!("RUNNING".parse::<PartitionState>(), Err(UnknownPartitionState("RUNNING".to_owned())));
    }

    #[test]
    fn transient_states_are_the_three_ing_states_other_than_mirroring() {
        let transient: Vec<_> = PartitionState::ALL.into_iter().filter(|s| s.is_transient()).collect();
        assert_eq!(transient, [Preparing, Pausing, Stopping]);
    }

    #[test]
    fn roll_up_of_nothing_is_unknown() {
        assert_eq!(roll_up([]), Unknown);
    }

    #[test]
    fn roll_up_of_a_uniform_topic_is_its_state() {
        for state in PartitionState::ALL {
            assert_eq!(roll_up([state, state, state]), state);
        }
    }

    #[test]
    fn roll_up_any_failed_wins() {
        for state in PartitionState::ALL {
            assert_eq!(roll_up([state, Failed, state]), Failed);
        }
    }

    #[test]
    fn roll_up_mixed_is_the_least_advanced() {
        assert_eq!(roll_up([Mirroring, Preparing, Mirroring]), Preparing);
        assert_eq!(roll_up([Paused, Pausing]), Pausing);
        assert_eq!(roll_up([Stopped, Stopping]), Stopping);
        assert_eq!(roll_up([Stopped, Mirroring]), Mirroring);
        assert_eq!(roll_up([Mirroring, Unknown]), Unknown);
        assert_eq!(roll_up([Paused, Stopping, Stopped]), Paused);
    }

    #[test]
    fn counts_track_each_state() {
        let counts: StateCounts = [Mirroring, Mirroring, Pausing].into_iter().collect();
        assert_eq!(counts.count(Mirroring), 2);
        assert_eq!(counts.count(Pausing), 1);
        assert_eq!(counts.count(Failed), 0);
        assert_eq!(counts.total(), 3);
        assert!(counts.is_mixed());
        assert_eq!(counts.roll_up(), Mirroring);
        assert!(!StateCounts::default().is_mixed());
    }
}
