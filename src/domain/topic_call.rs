//! What a lifecycle call does to one topic: the one authority the engine's checks, the API's
//! per-topic answers and the dashboard's buttons all ask, so what the page offers the engine
//! accepts, with the same words when it does not.
//!
//! A call looks at every partition of the topic ([`PartitionFacts`]) and either refuses the
//! whole topic (one partition it cannot apply to, named with why and what to do instead) or
//! answers a [`TopicPlan`]: the partitions it moves now, the FAILED partitions whose retry it
//! redirects (a pause or resume of a topic in an incident), and those already where it leads.
//!
//! Per state (the transition table's rows, `super::transition::rule`):
//!
//! | call | moves | already there | FAILED | refused |
//! |---|---|---|---|---|
//! | start (again) | UNKNOWN, STOPPED | PREPARING, MIRRORING | refused: stop it first | PAUSING, PAUSED (resume instead), STOPPING |
//! | pause | MIRRORING | PAUSING, PAUSED | stays FAILED, pauses when retried | UNKNOWN, PREPARING, STOPPING, STOPPED |
//! | resume | PAUSING, PAUSED | PREPARING, MIRRORING | stays FAILED, mirrors when retried | UNKNOWN, STOPPING, STOPPED |
//! | stop | every state but STOPPED | STOPPED | moved (failed over) | — |
//! | recover | FAILED | every other state | moved | a FOREIGN_WRITE partition |
//!
//! A pause of a topic with FAILED partitions pauses the others now and leaves the FAILED ones
//! FAILED; when they are retried (automatically, or by a recover) they pause instead of mirroring
//! again, so the topic ends up paused as asked. The answer says so ([`TopicPlan::note`]). The same
//! for a resume. When a FAILED partition failed while starting, during a resync or while being
//! failed over, a pause or resume cannot decide for it and the topic is refused with what to do
//! (`super::transition::redirect_failed`).

use super::event::EventKind;
use super::state::PartitionState;
use super::transition::redirect_failed;

/// A lifecycle call on a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TopicCall {
    /// Start, or start again a STOPPED topic in the same direction.
    Start,
    Pause,
    Resume,
    /// Fail over.
    Stop,
    /// Retry FAILED partitions now.
    Recover,
}

impl TopicCall {
    pub const ALL: [TopicCall; 5] =
        [TopicCall::Start, TopicCall::Pause, TopicCall::Resume, TopicCall::Stop, TopicCall::Recover];

    /// The partition event the call applies.
    #[must_use]
    pub const fn event(self) -> EventKind {
        match self {
            TopicCall::Start => EventKind::Start,
            TopicCall::Pause => EventKind::Pause,
            TopicCall::Resume => EventKind::Resume,
            TopicCall::Stop => EventKind::Stop,
            TopicCall::Recover => EventKind::Recover,
        }
    }

    #[must_use]
    pub const fn verb(self) -> &'static str {
        self.event().verb()
    }
}

/// What a call needs to know of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionFacts {
    pub partition: i32,
    pub state: PartitionState,
    /// A FAILED partition's state when it failed.
    pub failed_in: Option<PartitionState>,
    /// A start with truncation `resync` has not completed (its retry deletes and copies again).
    pub resync: bool,
    /// Failed with FOREIGN_WRITE (a recover would mirror on top of a record kmirror did not
    /// write).
    pub foreign_write: bool,
}

impl PartitionFacts {
    /// A partition in `state` with nothing else to know (tests, a view without failure data).
    #[must_use]
    pub const fn in_state(partition: i32, state: PartitionState) -> Self {
        PartitionFacts { partition, state, failed_in: None, resync: false, foreign_write: false }
    }
}

/// What a call does with one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Moved now.
    Move,
    /// Stays FAILED; its retry goes where the call leads.
    Redirect,
    /// Already where the call leads, or a call that leaves it alone: nothing to do.
    Nothing,
    /// The call cannot apply: why, and what to do instead.
    Refuse(&'static str),
}

/// The decision for one partition.
#[must_use]
pub fn decide(call: TopicCall, p: &PartitionFacts) -> Decision {
    use Decision::{Move, Nothing, Refuse};
    use PartitionState as S;
    match (call, p.state) {
        (TopicCall::Start, S::Unknown | S::Stopped) => Move,
        (TopicCall::Start, S::Preparing | S::Mirroring) => Nothing,
        (TopicCall::Start, S::Pausing | S::Paused) => Refuse("it is paused: resume it instead"),
        (TopicCall::Start, S::Failed) => Refuse("it is FAILED: recover it, or stop it first and then start it again"),
        (TopicCall::Start, S::Stopping) => Refuse("it is being failed over: wait for the stop to finish"),

        (TopicCall::Pause, S::Mirroring) => Move,
        (TopicCall::Pause, S::Pausing | S::Paused) => Nothing,
        (TopicCall::Pause, S::Unknown | S::Preparing) => Refuse("it is starting: pause it once it is MIRRORING"),
        (TopicCall::Resume, S::Pausing | S::Paused) => Move,
        (TopicCall::Resume, S::Preparing | S::Mirroring) => Nothing,
        (TopicCall::Resume, S::Unknown) => Refuse("it was never mirrored: start it"),
        (TopicCall::Pause | TopicCall::Resume, S::Failed) => {
            match redirect_failed(call.event(), p.failed_in, p.resync) {
                Ok(Some(_)) => Decision::Redirect,
                Ok(None) => Nothing,
                Err(why) => Refuse(why),
            }
        }
        (TopicCall::Pause | TopicCall::Resume, S::Stopping) => {
            Refuse("it is being failed over: wait for the stop to finish")
        }
        (TopicCall::Pause | TopicCall::Resume, S::Stopped) => {
            Refuse("it is failed over (STOPPED): start it again to mirror it")
        }

        (TopicCall::Stop, S::Stopped) => Nothing,
        (TopicCall::Stop, _) => Move,

        (TopicCall::Recover, S::Failed) if p.foreign_write => Refuse(
            "it FAILED with FOREIGN_WRITE (a record kmirror did not write is in the destination partition): stop the topic, then start it with truncation resync",
        ),
        (TopicCall::Recover, S::Failed) => Move,
        (TopicCall::Recover, _) => Nothing,
    }
}

/// What a call does to a topic it accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicPlan {
    /// Partitions moved now.
    pub moves: Vec<i32>,
    /// FAILED partitions whose retry goes where the call leads.
    pub redirects: Vec<i32>,
    /// Partitions with nothing to do.
    pub nothing: Vec<i32>,
}

impl TopicPlan {
    /// Whether the call changes anything.
    #[must_use]
    pub fn changes_anything(&self) -> bool {
        !self.moves.is_empty() || !self.redirects.is_empty()
    }

    /// What an operator should know beyond "accepted": FAILED partitions that will follow once
    /// retried.
    #[must_use]
    pub fn note(&self, call: TopicCall) -> Option<String> {
        if self.redirects.is_empty() {
            return None;
        }
        let list: Vec<String> = self.redirects.iter().map(i32::to_string).collect();
        let one = self.redirects.len() == 1;
        let (which, stay, they) = if one {
            (format!("partition {} is", list[0]), "stays", "it")
        } else {
            (format!("partitions {} are", list.join(", ")), "stay", "they")
        };
        let (does, instead) = match (call, one) {
            (TopicCall::Resume, true) => ("mirrors", "pausing"),
            (TopicCall::Resume, false) => ("mirror", "pausing"),
            (_, true) => ("pauses", "mirroring"),
            (_, false) => ("pause", "mirroring"),
        };
        Some(format!(
            "{which} FAILED and {stay} FAILED; when retried (automatically, or now with topics:recover) {they} {does} instead of {instead}"
        ))
    }
}

/// A call refused for a topic: the first partition it cannot apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRefusal {
    pub partition: i32,
    pub state: PartitionState,
    pub why: &'static str,
}

impl TopicRefusal {
    /// The text the API and the dashboard show.
    #[must_use]
    pub fn message(&self, call: TopicCall, topic: &str) -> String {
        format!("cannot {} topic {topic:?}: partition {} is {}; {}", call.verb(), self.partition, self.state, self.why)
    }
}

/// What `call` does to a topic whose partitions are `partitions`.
///
/// # Errors
///
/// The first partition the call cannot apply to; then it changes nothing in the topic.
pub fn plan(call: TopicCall, partitions: &[PartitionFacts]) -> Result<TopicPlan, TopicRefusal> {
    let mut out = TopicPlan::default();
    for p in partitions {
        match decide(call, p) {
            Decision::Move => out.moves.push(p.partition),
            Decision::Redirect => out.redirects.push(p.partition),
            Decision::Nothing => out.nothing.push(p.partition),
            Decision::Refuse(why) => return Err(TopicRefusal { partition: p.partition, state: p.state, why }),
        }
    }
    Ok(out)
}

/// Whether a dashboard offers `call` for a topic: accepted, and it changes something.
#[must_use]
pub fn offered(call: TopicCall, partitions: &[PartitionFacts]) -> bool {
    plan(call, partitions).is_ok_and(|p| p.changes_anything())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::record::{PartitionError, PartitionRecord};
    use crate::domain::transition::{TransitionError, transition};
    use crate::domain::{ErrorCode, Event, Timestamp, Truncation};

    use PartitionState as S;

    /// A record that has these facts (a FAILED one with its failure).
    fn record(f: &PartitionFacts) -> PartitionRecord {
        let mut r = PartitionRecord::new(Timestamp::from_millis(1));
        r.state = f.state;
        r.state_epoch = 3;
        r.previous_state = f.failed_in;
        if f.state == S::Failed {
            let code = if f.foreign_write { ErrorCode::ForeignWrite } else { ErrorCode::SourceUnreachable };
            r.error = Some(PartitionError { code, message: "x".into(), since: Timestamp::from_millis(1) });
        }
        if f.resync {
            r.truncation = Truncation::Resync { quarantine: false };
        }
        r
    }

    fn event(call: TopicCall) -> Event {
        match call {
            TopicCall::Start => Event::Start { truncation: Truncation::None },
            TopicCall::Pause => Event::Pause,
            TopicCall::Resume => Event::Resume,
            TopicCall::Stop => Event::Stop,
            TopicCall::Recover => Event::Recover,
        }
    }

    /// Every partition a call can meet: each state, and for FAILED each state it failed in, with
    /// and without a resync and a foreign write.
    fn every_partition() -> Vec<PartitionFacts> {
        let mut out = Vec::new();
        for state in PartitionState::ALL {
            if state != S::Failed {
                out.push(PartitionFacts::in_state(0, state));
                continue;
            }
            for failed_in in PartitionState::ALL.into_iter().filter(|s| *s != S::Failed).map(Some).chain([None]) {
                for resync in [false, true] {
                    if resync && !matches!(failed_in, Some(S::Preparing)) {
                        continue; // a resync is only ever pending in (or failed in) PREPARING
                    }
                    for foreign_write in [false, true] {
                        out.push(PartitionFacts { partition: 0, state, failed_in, resync, foreign_write });
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_decision_is_what_the_state_machine_does() {
        for call in TopicCall::ALL {
            for f in every_partition() {
                let r = record(&f);
                let got = transition(&r, event(call), Timestamp::from_millis(2));
                let d = decide(call, &f);
                match (&d, &got) {
                    (Decision::Move, Ok(step)) => assert_ne!(step.next.state, f.state, "{call:?} {f:?}"),
                    // A stop that did not finish is run again (the engine re-runs its sequence).
                    (Decision::Move, Err(TransitionError::AlreadyInState { state: S::Stopping, .. }))
                        if call == TopicCall::Stop => {}
                    (Decision::Redirect, Ok(step)) => {
                        assert_eq!(step.next.state, S::Failed, "{call:?} {f:?}");
                        assert_ne!(step.next.failed_in(), f.failed_in, "{call:?} {f:?}: the retry goes elsewhere");
                    }
                    (Decision::Nothing, Err(TransitionError::AlreadyInState { .. })) => {}
                    (Decision::Refuse(_), Err(e)) => assert!(!e.is_harmless(), "{call:?} {f:?}: {e}"),
                    _ => panic!("{call:?} of {f:?}: decided {d:?}, the state machine says {got:?}"),
                }
            }
        }
    }

    #[test]
    fn a_pause_with_failed_partitions_pauses_the_others_and_says_so() {
        let failed = PartitionFacts {
            partition: 2,
            state: S::Failed,
            failed_in: Some(S::Mirroring),
            resync: false,
            foreign_write: false,
        };
        let parts = [PartitionFacts::in_state(0, S::Mirroring), PartitionFacts::in_state(1, S::Paused), failed];
        let p = plan(TopicCall::Pause, &parts).unwrap();
        assert_eq!((p.moves.clone(), p.redirects.clone(), p.nothing.clone()), (vec![0], vec![2], vec![1]));
        assert_eq!(
            p.note(TopicCall::Pause).unwrap(),
            "partition 2 is FAILED and stays FAILED; when retried (automatically, or now with topics:recover) it pauses instead of mirroring"
        );
        assert!(offered(TopicCall::Pause, &parts));
        // A partition that failed while starting cannot be decided for: the topic is refused.
        let starting = PartitionFacts { failed_in: Some(S::Preparing), ..failed };
        let e = plan(TopicCall::Pause, &[PartitionFacts::in_state(0, S::Mirroring), starting]).unwrap_err();
        assert_eq!(e.partition, 2);
        assert!(
            e.message(TopicCall::Pause, "orders")
                .starts_with("cannot pause topic \"orders\": partition 2 is FAILED; it failed while starting")
        );
        assert!(!offered(TopicCall::Pause, &[PartitionFacts::in_state(0, S::Mirroring), starting]));
    }

    #[test]
    fn offers_follow_the_plans() {
        let of = |states: &[S]| -> Vec<TopicCall> {
            let parts: Vec<PartitionFacts> =
                states.iter().enumerate().map(|(i, s)| PartitionFacts::in_state(i as i32, *s)).collect();
            TopicCall::ALL.into_iter().filter(|c| offered(*c, &parts)).collect()
        };
        assert_eq!(of(&[S::Mirroring, S::Paused]), vec![TopicCall::Pause, TopicCall::Resume, TopicCall::Stop]);
        assert_eq!(of(&[S::Stopped]), vec![TopicCall::Start]);
        // A PREPARING partition cannot pause yet: no Pause button.
        assert_eq!(of(&[S::Mirroring, S::Preparing]), vec![TopicCall::Stop]);
        assert_eq!(of(&[S::Stopped, S::Stopped]), vec![TopicCall::Start]);
        assert!(of(&[]).is_empty(), "a topic without partitions offers nothing");
    }
}
