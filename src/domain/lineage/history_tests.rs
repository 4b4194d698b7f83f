//! Generated two-cluster histories against the lineage decisions.
//!
//! Two clusters, 0 and 1, hold one partition of one topic each. `into[c]` is the mirror that copies
//! the topic from the other cluster into `c` (its records live in `c`'s state, as kmirror's do).
//! A history is a sequence of local writes (plain, transactional, with aborted transactions),
//! mirroring rounds (all or part of what the source has), failovers and starts (plain, or resync
//! with quarantine). The model keeps the lineage bookkeeping the engine keeps (positions, stop
//! points, a failback adopting the other side's stop point, a resync deleting and starting over)
//! and decides every start with the domain's own functions, the same calls the engine makes:
//! [`PartitionLineage::divergence_point`], [`decide_start`], [`decide_failback`] and
//! [`quarantine::range`].
//!
//! What must hold, for a cluster whose mirrors in both directions are not mirroring:
//! - the records a quarantine would keep are exactly the cluster's records that the other cluster
//!   does not hold (each record has an identity; a mirrored copy keeps it);
//! - a start refused over divergent records counts exactly those;
//! - a start that is accepted without a resync mirrors over no such record;
//! - a resync with quarantine deletes no such record without keeping a copy.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::domain::quarantine;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// A committed record with its identity.
    Record(u32),
    /// A transaction marker (commit or abort).
    Marker,
    /// A record of an aborted transaction.
    Aborted,
}

#[derive(Debug, Clone, Default)]
struct Log {
    entries: Vec<Entry>,
    log_start: i64,
}

impl Log {
    fn hwm(&self) -> i64 {
        self.entries.len() as i64
    }

    fn bounds(&self) -> LogBounds {
        LogBounds::new(self.log_start, self.hwm())
    }

    fn push(&mut self, e: Entry) {
        self.entries.push(e);
    }

    /// The identities of the records still in the log.
    fn ids(&self) -> BTreeSet<u32> {
        self.records_from(0).into_iter().map(|(_, id)| id).collect()
    }

    /// The committed records still in the log at or after `from`: `(offset, id)`.
    fn records_from(&self, from: i64) -> Vec<(i64, u32)> {
        let from = from.max(self.log_start);
        (from..self.hwm())
            .filter_map(|o| match self.entries[o as usize] {
                Entry::Record(id) => Some((o, id)),
                _ => None,
            })
            .collect()
    }

    /// What a `read_committed` scan from `from` finds.
    fn scan(&self, from: i64) -> RecordScan {
        let found = self.records_from(from);
        RecordScan {
            records: found.len() as i64,
            offsets: found.first().zip(found.last()).map(|(a, b)| (a.0, b.0)),
            timestamps: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Never,
    Mirroring,
    Stopped,
}

#[derive(Debug, Clone, Copy)]
struct Mirror {
    state: State,
    position: Option<MirrorPosition>,
    stop: Option<StopPoint>,
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Write { cluster: usize, records: u8, transactional: bool, aborted_first: bool },
    Mirror { into: usize, at_most: u8 },
    Stop { into: usize },
    Start { into: usize, quarantine: bool },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..2usize, 1..5u8, any::<bool>(), any::<bool>()).prop_map(|(cluster, records, transactional, aborted_first)| {
            Step::Write { cluster, records, transactional, aborted_first }
        }),
        3 => (0..2usize, 1..8u8).prop_map(|(into, at_most)| Step::Mirror { into, at_most }),
        2 => (0..2usize).prop_map(|into| Step::Stop { into }),
        3 => (0..2usize, any::<bool>()).prop_map(|(into, quarantine)| Step::Start { into, quarantine }),
    ]
}

struct World {
    logs: [Log; 2],
    into: [Mirror; 2],
    next_id: u32,
    /// How many starts were refused over divergent records, adopted a failback, and quarantined
    /// something (to see that the histories reach the interesting cases).
    seen: [usize; 3],
}

impl World {
    fn new() -> Self {
        let idle = Mirror { state: State::Never, position: None, stop: None };
        Self { logs: [Log::default(), Log::default()], into: [idle, idle], next_id: 0, seen: [0; 3] }
    }

    /// What cluster `c` knows of its partition's two-way history, as `lineage_here` assembles it:
    /// its own mirror's stop point and position, and the other direction's lineage when the
    /// other cluster's state has one that applies (that mirror failed over).
    fn lineage_here(&self, c: usize) -> PartitionLineage {
        let (own, other) = (self.into[c], self.into[1 - c]);
        let copied_out = if other.state == State::Stopped {
            ReverseLineage::of(other.stop.as_ref(), other.position.as_ref())
        } else {
            None
        };
        PartitionLineage {
            stop: own.stop,
            position: own.position,
            copied_out,
            source_log_start: Some(self.logs[1 - c].log_start),
        }
    }

    /// `c`'s records that the other cluster does not hold.
    fn not_there(&self, c: usize) -> BTreeSet<u32> {
        self.logs[c].ids().difference(&self.logs[1 - c].ids()).copied().collect()
    }

    /// What a quarantine of `c` would keep, computed as the engine does.
    fn quarantine_of(&self, c: usize) -> BTreeSet<u32> {
        let log = &self.logs[c];
        let (from, end) = quarantine::range(self.lineage_here(c).divergence_point(), log.log_start, log.hwm());
        log.records_from(from).into_iter().filter(|(o, _)| *o < end).map(|(_, id)| id).collect()
    }

    fn check(&self, c: usize) {
        if self.into[0].state == State::Mirroring || self.into[1].state == State::Mirroring {
            return;
        }
        assert_eq!(
            self.quarantine_of(c),
            self.not_there(c),
            "cluster {c}: the quarantine is what the other side lacks"
        );
    }

    fn apply(&mut self, s: Step) {
        match s {
            Step::Write { cluster, records, transactional, aborted_first } => {
                // A write into a partition being mirrored is a foreign write (FAILED): not here.
                if self.into[cluster].state == State::Mirroring {
                    return;
                }
                let log = &mut self.logs[cluster];
                if aborted_first {
                    log.push(Entry::Aborted);
                    log.push(Entry::Aborted);
                    log.push(Entry::Marker);
                }
                for _ in 0..records {
                    log.push(Entry::Record(self.next_id));
                    self.next_id += 1;
                }
                if transactional {
                    log.push(Entry::Marker);
                }
            }
            Step::Mirror { into, at_most } => {
                let m = self.into[into];
                let (State::Mirroring, Some(pos)) = (m.state, m.position) else { return };
                let copy: Vec<(i64, u32)> =
                    self.logs[1 - into].records_from(pos.next_source_offset).into_iter().take(at_most.into()).collect();
                let Some(&(last, _)) = copy.last() else { return };
                // One transaction: the records, then its commit marker.
                let dest = &mut self.logs[into];
                for (_, id) in &copy {
                    dest.push(Entry::Record(*id));
                }
                let end = dest.hwm();
                dest.push(Entry::Marker);
                self.into[into].position = Some(MirrorPosition {
                    next_source_offset: last + 1,
                    source_leader_epoch: 0,
                    destination_end_offset: end,
                });
            }
            Step::Stop { into } => {
                let m = &mut self.into[into];
                if m.state != State::Mirroring {
                    return;
                }
                let next = m.position.map_or(0, |p| p.next_source_offset);
                m.stop = Some(StopPoint {
                    last_mirror_epoch: 0,
                    last_mirrored_source_offset: (next > 0).then_some(next - 1),
                    // Read at STOPPED: after every kmirror marker.
                    destination_stop_offset: self.logs[into].hwm(),
                });
                m.state = State::Stopped;
            }
            Step::Start { into, quarantine } => self.start(into, quarantine),
        }
    }

    fn start(&mut self, into: usize, quarantine: bool) {
        let own = self.into[into];
        // A start while the other direction still copies from here is refused (a loop), and a
        // start of a mirroring topic is a harmless repeat.
        if self.into[1 - into].state == State::Mirroring || own.state == State::Mirroring {
            return;
        }
        self.check(into);
        let here = self.lineage_here(into);
        let not_there = self.not_there(into);
        let (dest, src) = (&self.logs[into], &self.logs[1 - into]);
        let bounds = dest.bounds();
        if quarantine {
            let kept = self.quarantine_of(into);
            let lost: Vec<_> = not_there.difference(&kept).collect();
            assert!(lost.is_empty(), "a resync deletes {lost:?} without a copy; the other side does not have them");
            if !kept.is_empty() {
                self.seen[2] += 1;
            }
            let input = StartInput {
                position: own.position,
                stop: own.stop,
                truncation: Truncation::Resync { quarantine: true },
                destination: bounds,
                source_log_start_offset: src.log_start,
            };
            let decision = decide_start(&input).expect("consistent lineage");
            let (StartDecision::Resync { delete_up_to, .. }, Some(from)) = (decision, decision.start_position()) else {
                panic!("a resync: {decision:?}")
            };
            self.logs[into].log_start = delete_up_to;
            self.enter_mirroring(into, from);
            return;
        }
        // The engine's start: its own lineage first; over records after it, the other
        // direction's lineage (a failback, or a round trip) decides with a record scan from the
        // divergence point.
        let needs_lineage = match own.state {
            State::Never => dest.hwm() > 0,
            _ => PartitionLineage { copied_out: None, ..here }.divergence(bounds).is_diverged(),
        };
        let decision = if needs_lineage {
            if here.copied_out.is_none() {
                // Refused: no lineage explains the records (a conflict, or local writes).
                assert!(
                    !not_there.is_empty() || dest.records_from(here.divergence_point()).is_empty(),
                    "refused, but the other side has every record"
                );
                return;
            }
            let scan = dest.scan(here.divergence_point());
            decide_failback(&here, bounds, &scan, Truncation::None, 0).expect("consistent lineage")
        } else {
            let input = StartInput {
                position: own.position,
                stop: own.stop,
                truncation: Truncation::None,
                destination: bounds,
                source_log_start_offset: src.log_start,
            };
            decide_start(&input).expect("consistent lineage")
        };
        match decision {
            StartDecision::Refuse(Refusal::LocalWrites { divergence, .. }) => {
                self.seen[0] += 1;
                assert!(!not_there.is_empty(), "refused, but the other side has every record");
                if needs_lineage {
                    assert_eq!(
                        divergence.local_records,
                        not_there.len() as i64,
                        "the refusal counts what the other side lacks"
                    );
                }
            }
            StartDecision::Refuse(r @ Refusal::DestinationBehind { .. }) => panic!("no history loses records: {r}"),
            StartDecision::Incremental { .. } => {
                assert!(not_there.is_empty(), "a start mirrors over {not_there:?}, which the other side lacks");
                if needs_lineage {
                    self.seen[1] += 1;
                }
                let from = decision.start_position().expect("a position");
                self.enter_mirroring(into, from);
            }
            StartDecision::Resync { .. } => panic!("no resync was asked for"),
        }
    }

    fn enter_mirroring(&mut self, into: usize, from: MirrorPosition) {
        // As the transition into MIRRORING does: the position is the start's, and the old stop
        // point no longer bounds the mirrored data.
        self.into[into] = Mirror { state: State::Mirroring, position: Some(from), stop: None };
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn quarantine_and_refusals_are_exactly_what_the_other_side_lacks(steps in prop::collection::vec(step(), 1..60)) {
        let mut w = World::new();
        for s in steps {
            w.apply(s);
            w.check(0);
            w.check(1);
        }
    }
}

/// The histories reach the cases that matter: refusals, failbacks adopted, quarantines that keep
/// records, and the round trip of the defect this guards against (a quarantine after A -> B,
/// B -> A, strays on B kept only the strays).
#[test]
fn the_generated_histories_reach_refusals_failbacks_and_quarantines() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(step(), 1..60);
    let mut seen = [0; 3];
    for _ in 0..2_000 {
        let mut w = World::new();
        for s in strategy.new_tree(&mut runner).expect("a history").current() {
            w.apply(s);
        }
        for (a, b) in seen.iter_mut().zip(w.seen) {
            *a += b;
        }
    }
    assert!(seen.iter().all(|n| *n > 20), "refused, adopted, quarantined: {seen:?}");
}

#[test]
fn a_round_trip_then_strays_quarantines_only_the_strays() {
    let (a, b) = (0, 1);
    let mut w = World::new();
    w.apply(Step::Write { cluster: a, records: 4, transactional: true, aborted_first: false });
    // m1: A -> B, caught up, failed over; B takes writes as the primary.
    w.apply(Step::Start { into: b, quarantine: false });
    w.apply(Step::Mirror { into: b, at_most: 8 });
    w.apply(Step::Stop { into: b });
    w.apply(Step::Write { cluster: b, records: 4, transactional: true, aborted_first: false });
    // m2: B -> A fails back incrementally, is caught up and failed over; A takes writes again.
    w.apply(Step::Start { into: a, quarantine: false });
    assert_eq!(w.into[a].state, State::Mirroring, "the failback is adopted");
    w.apply(Step::Mirror { into: a, at_most: 8 });
    w.apply(Step::Stop { into: a });
    w.apply(Step::Write { cluster: a, records: 3, transactional: false, aborted_first: false });
    // Three strays on B.
    w.apply(Step::Write { cluster: b, records: 3, transactional: false, aborted_first: false });
    let strays: BTreeSet<u32> = (11..14).collect();
    assert_eq!(w.not_there(b), strays);
    assert_eq!(w.quarantine_of(b), strays, "B's own local writes crossed with the failback: not kept");
    w.apply(Step::Start { into: b, quarantine: false });
    assert_eq!(w.into[b].state, State::Stopped, "refused over the strays");
    w.apply(Step::Start { into: b, quarantine: true });
    assert_eq!(w.into[b].state, State::Mirroring, "resynced");
}
