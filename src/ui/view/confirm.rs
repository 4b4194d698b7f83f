//! The confirmation page and dialog (`templates/pages/confirm.html`), with the impact per
//! partition.

use crate::domain::approval::ApprovalAction;
use crate::domain::{PartitionState, StateCounts};
use crate::engine::{GroupReadiness, MirrorSnapshot, PartitionSnapshot, TopicSnapshot};
use crate::format;
use crate::history::History;

use super::actions::UiOp;
use super::chart::{EtaView, eta_of};
use super::common::{StateView, Viewer, mirror_href, mixed_text, state_view, topic_href};

/// Partitions listed per topic in a confirmation dialog (worst lag first); the rest are summed.
const IMPACT_ROWS: usize = 50;

#[derive(Debug, Clone)]
pub struct ImpactRow {
    pub partition: i32,
    pub state: StateView,
    pub hwm: String,
    pub lso: String,
    pub mirrored: String,
    pub lag_records: String,
    pub lag_seconds: String,
    pub dest_hwm: String,
    pub stop_offset: String,
    pub local_writes: String,
    /// A FAILED partition's error code and message (recover), else empty.
    pub error_code: String,
    pub error_message: String,
    pub retries: String,
    /// Something is lost or refused for this partition.
    pub warn: bool,
}

#[derive(Debug, Clone)]
pub struct ConfirmTopic {
    pub name: String,
    pub href: String,
    pub state: StateView,
    pub mixed: String,
    pub partitions: String,
    pub rows: Vec<ImpactRow>,
    pub more: usize,
    pub more_text: String,
    pub lag_records: String,
    pub lag_seconds: String,
    pub local_writes: String,
    pub local_writes_n: i64,
    /// When the topic will have caught up (failover: how long to wait to lose nothing).
    pub eta: EtaView,
    /// What the call will do beyond the obvious (`domain::topic_call`'s note), said before it
    /// is sent.
    pub note: Option<String>,
    /// Why the engine will refuse the call for this topic, if it will.
    pub refused: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ConfirmView {
    pub mirror: String,
    pub mirror_href: String,
    pub op: &'static str,
    pub title: String,
    pub button: String,
    pub danger: bool,
    pub explanation: &'static str,
    pub topics: Vec<ConfirmTopic>,
    /// Names that are not topics of this mirror (shown, not submitted).
    pub missing: Vec<String>,
    /// What the operator must type (failover).
    pub confirm_word: Option<String>,
    pub confirm_pattern: String,
    pub total_lag: String,
    pub total_lag_n: i64,
    pub total_lag_seconds: String,
    /// Partitions marked in the impact rows: with local writes (restart, refused without
    /// resync), or with a FOREIGN_WRITE (recover, whose topic is refused).
    pub warned: usize,
    pub show_truncation: bool,
    pub show_impact: bool,
    pub csrf: String,
    pub actions_url: String,
    pub error: Option<String>,
    /// Failover: how long to wait to lose nothing, when every selected topic has an estimate
    /// (the longest), e.g. `about 3 min`; else empty.
    pub wait: String,
    /// Failover: the selected topics that are not catching up (they never reach zero lag by
    /// waiting), with their estimate.
    pub not_catching_up: Vec<(String, String)>,
    /// Failover: what failing back later will cost (see [`failback_cost`]); else empty.
    pub failback_cost: String,
    /// Failover: the consumer groups with commits on the selected topics and whether each
    /// resumes exactly on the destination; not-ready groups first.
    pub groups: Vec<ConfirmGroup>,
    /// How many of `groups` are not ready, and ready.
    pub groups_not_ready: usize,
    pub groups_ready: usize,
    /// The mirror's approval policy covers this call: what the dialog says about it (the call
    /// becomes a request that waits for a second person); else empty.
    pub approval_note: String,
    /// A reason must be given (the call always needs approval; a restart only with resync).
    pub reason_required: bool,
    /// The viewer may run it at once instead (break-glass, admins).
    pub can_break_glass: bool,
}

/// A consumer group in the failover dialog.
#[derive(Debug, Clone)]
pub struct ConfirmGroup {
    pub name: String,
    pub ready: bool,
    /// Why not (not ready only).
    pub why: String,
}

/// The groups that consume any of `topics`, with their failover readiness (not ready first).
fn groups_of(m: &MirrorSnapshot, topics: &[&TopicSnapshot]) -> Vec<ConfirmGroup> {
    let mut out: Vec<ConfirmGroup> = m
        .groups
        .iter()
        .filter(|g| g.topics.iter().any(|t| topics.iter().any(|s| s.name == *t)))
        .filter_map(|g| match g.readiness() {
            GroupReadiness::Ready => Some(ConfirmGroup { name: g.group.clone(), ready: true, why: String::new() }),
            GroupReadiness::NotReady(why) => Some(ConfirmGroup { name: g.group.clone(), ready: false, why }),
            GroupReadiness::NothingCommitted => None,
        })
        .collect();
    out.sort_by(|a, b| a.ready.cmp(&b.ready).then_with(|| a.name.cmp(&b.name)));
    out
}

/// What a later failback of the selected topics costs, said in the failover dialog (issue 18):
/// `not_mirrored` records the source has that are not mirrored yet, `destination_records` the
/// topics' size here (an upper bound from the high watermarks).
///
/// After a failover, failing back (a mirror from this cluster into the source's) copies only
/// what is written here afterwards: the records this side already has came from the source. The
/// records not mirrored yet are on the source only, after the point where the two sides part:
/// a failback finds them diverged and refuses those partitions unless the operator resyncs
/// (a full copy of the topic from here) or resyncs with quarantine.
pub fn failback_cost(not_mirrored: i64, destination_records: i64) -> String {
    let incremental = "Failing back later copies only what is written here after the failover";
    if not_mirrored <= 0 {
        format!("{incremental}: nothing has diverged, so no full copy is needed.")
    } else {
        format!(
            "{incremental}, but the {} records not mirrored stay on the source only: a failback finds them diverged \
             (DESTINATION_DIVERGED) and needs a resync, a full copy of up to {} records from here, or a resync with \
             quarantine to keep them.",
            format::int(not_mirrored),
            format::int(destination_records.max(0)),
        )
    }
}

fn impact_row(p: &PartitionSnapshot, op: UiOp) -> ImpactRow {
    // The engine's lineage counts them (records already deleted are not in anyone's way); the
    // page only shows the count, so the dialog and the refusal never disagree.
    let local = p.local_writes;
    // What a failover leaves unmirrored: the computation `validate_only` of a stop answers with.
    let impact = p.stop_impact();
    ImpactRow {
        partition: p.partition,
        state: state_view(p.state),
        hwm: format::opt_int(p.source_high_watermark),
        lso: format::opt_int(p.source_last_stable_offset),
        mirrored: format::opt_int(p.mirrored_source_offset),
        lag_records: format::int(impact.records),
        lag_seconds: format::secs(impact.seconds),
        dest_hwm: format::opt_int(p.destination_high_watermark),
        stop_offset: format::opt_int(p.destination_stop_offset),
        local_writes: format::int(local),
        error_code: p.error.as_ref().map(|e| e.code.clone()).unwrap_or_default(),
        error_message: p.error.as_ref().map(|e| e.message.clone()).unwrap_or_default(),
        retries: format::int(i64::from(p.retry_count)),
        warn: match op {
            UiOp::Failover => impact.records > 0,
            UiOp::Restart => local > 0,
            // The engine refuses the recover of such a topic.
            UiOp::Recover => p.error.as_ref().is_some_and(|e| !e.recoverable),
            _ => false,
        },
    }
}

/// The confirmation for `op` on `topics` of mirror `m`, with the impact per partition.
pub fn confirm(
    m: &MirrorSnapshot,
    history: Option<&History>,
    op: UiOp,
    topics: &[String],
    viewer: &Viewer,
) -> ConfirmView {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in topics {
        match m.topic(name) {
            Some(t) => found.push(t),
            None => missing.push(name.clone()),
        }
    }
    let mut total_lag = 0i64;
    let mut total_secs = 0f64;
    let mut warned = 0usize;
    let confirm_topics: Vec<ConfirmTopic> = found
        .iter()
        .map(|t| {
            let c: StateCounts = t.partitions.iter().map(|p| p.state).collect();
            // The engine's own rule for this call and topic: what it will do, or why not.
            let plan = match op.call() {
                Some(call) => crate::domain::topic_call::plan(call, &crate::engine::call_facts(&t.partitions))
                    .map_err(|r| r.message(call, &t.name)),
                None => Ok(Default::default()),
            };
            let mut parts: Vec<&PartitionSnapshot> = t.partitions.iter().collect();
            // Worst first: what the operator most needs to see is at the top.
            parts.sort_by_key(|p| (std::cmp::Reverse(p.stop_impact().records), p.partition));
            // A recover lists what it retries: the FAILED partitions.
            let rows: Vec<ImpactRow> = parts
                .iter()
                .filter(|p| op != UiOp::Recover || p.state == PartitionState::Failed)
                .map(|p| impact_row(p, op))
                .collect();
            // The failover impact: the same numbers `validate_only` of a stop answers with.
            let impact = t.stop_impact();
            let (lag, secs) = (impact.records, impact.seconds);
            let local: i64 = t.partitions.iter().map(|p| p.local_writes).sum();
            warned += rows.iter().filter(|r| r.warn && matches!(op, UiOp::Restart | UiOp::Recover)).count();
            total_lag += lag;
            total_secs = total_secs.max(secs);
            let more = rows.len().saturating_sub(IMPACT_ROWS);
            ConfirmTopic {
                name: t.name.clone(),
                href: topic_href(&m.name, &t.name),
                state: state_view(t.state),
                mixed: mixed_text(&c),
                partitions: format::count(t.partitions.len()),
                rows: rows.into_iter().take(IMPACT_ROWS).collect(),
                more,
                more_text: if more == 0 {
                    String::new()
                } else {
                    format!("{} more partitions with less lag are not listed; the totals include them.", more)
                },
                lag_records: format::int(lag),
                lag_seconds: format::secs(secs),
                local_writes: format::int(local),
                local_writes_n: local,
                eta: eta_of(history, m, Some(&t.name)),
                note: plan.as_ref().ok().and_then(|p| op.call().and_then(|c| p.note(c))),
                refused: plan.err(),
            }
        })
        .collect();
    let (title, button, explanation) = match op {
        UiOp::Pause => (
            "Pause mirroring",
            "Pause",
            "Fetching stops after the open transaction commits. The topics stay read-only mirrors and \
             metadata sync continues. Resume continues exactly where mirroring paused.",
        ),
        UiOp::Resume => (
            "Resume mirroring",
            "Resume",
            "Mirroring continues from the last committed position; nothing is skipped or copied twice.",
        ),
        UiOp::Failover => (
            "Fail over",
            "Fail over",
            "The topics stop mirroring and become ordinary writable topics on the destination. \
             Records the source has that are not mirrored yet (the lag below) will not be copied. \
             The open transaction is aborted and the stop point is recorded, so the topics can be \
             restarted later.",
        ),
        UiOp::Restart => (
            "Restart mirroring",
            "Restart",
            "Mirroring starts again in the same direction. Without truncation, a partition whose \
             destination has local writes after the failover is refused (DESTINATION_DIVERGED). \
             Resync deletes the destination records and copies the source again from its log start.",
        ),
        UiOp::Start => ("Start mirroring", "Start", "Start mirroring these source topics."),
        UiOp::Recover => (
            "Recover failed partitions",
            "Recover",
            "Every FAILED partition of these topics is retried now, with its retry count reset: also \
             when its automatic retries are used up or the next one is minutes away. Each goes back \
             to what it was doing (mirroring, a pause or a failover) and its checks run again, so fix \
             the cause first: an error that is still there fails it again. Other partitions are not \
             touched.",
        ),
    };
    // The longest estimate among topics still behind; any topic not catching up means waiting
    // does not help (the dialog says which).
    let behind: Vec<&ConfirmTopic> = confirm_topics.iter().filter(|t| t.lag_records != "0").collect();
    let not_catching_up: Vec<(String, String)> = behind
        .iter()
        .filter(|t| matches!(t.eta.slug, "falling_behind" | "paused"))
        .map(|t| (t.name.clone(), t.eta.text.clone()))
        .collect();
    let longest = behind.iter().filter(|t| t.eta.slug == "eta").max_by_key(|t| {
        history.map_or(0, |h| match h.eta(m, Some(&t.name)) {
            crate::history::Eta::Eta { seconds } => seconds,
            _ => 0,
        })
    });
    let all_estimated = behind.iter().all(|t| t.eta.slug == "eta");
    let wait = match longest {
        Some(t) if all_estimated => t.eta.wait.clone(),
        _ => String::new(),
    };
    let failback_cost = if op == UiOp::Failover && !found.is_empty() {
        let here: i64 =
            found.iter().flat_map(|t| t.partitions.iter()).filter_map(|p| p.destination_high_watermark).sum();
        failback_cost(total_lag, here)
    } else {
        String::new()
    };
    let groups = if op == UiOp::Failover { groups_of(m, &found) } else { Vec::new() };
    let groups_not_ready = groups.iter().filter(|g| !g.ready).count();
    let count = confirm_topics.len();
    let title =
        if count == 1 { format!("{title}: {}", confirm_topics[0].name) } else { format!("{title}: {count} topics") };
    let mut button = if count == 1 { button.to_string() } else { format!("{button} {count} topics") };
    let policy = &m.approval;
    let approval_wait = |p: &crate::engine::ApprovalPolicy| format::duration_ms(p.expires_after_seconds as i64 * 1000);
    let (approval_note, reason_required) = match op {
        UiOp::Failover if policy.requires(ApprovalAction::Stop) => {
            button = format!("Request {}", button.to_lowercase());
            (
                format!(
                    "Mirror {} needs a second person's approval for failovers: this sends a request that another \
                     operator approves or rejects within {}. Nothing stops until then.",
                    m.name,
                    approval_wait(policy)
                ),
                true,
            )
        }
        UiOp::Restart if policy.requires(ApprovalAction::Resync) => (
            format!(
                "Mirror {} needs a second person's approval for a resync: with resync, this sends a request that \
                 another operator approves or rejects within {} (give a reason).",
                m.name,
                approval_wait(policy)
            ),
            false,
        ),
        _ => (String::new(), false),
    };
    let confirm_word = (op == UiOp::Failover && count > 0)
        .then(|| if count == 1 { confirm_topics[0].name.clone() } else { m.name.clone() });
    ConfirmView {
        mirror: m.name.clone(),
        mirror_href: mirror_href(&m.name),
        op: op.value(),
        title,
        button,
        danger: op == UiOp::Failover,
        explanation,
        confirm_pattern: confirm_word.as_deref().map(format::exact_pattern).unwrap_or_default(),
        confirm_word,
        topics: confirm_topics,
        missing,
        total_lag: format::int(total_lag),
        total_lag_n: total_lag,
        total_lag_seconds: format::secs(total_secs),
        warned,
        show_truncation: op == UiOp::Restart,
        show_impact: matches!(op, UiOp::Failover | UiOp::Restart | UiOp::Recover),
        csrf: viewer.csrf.clone(),
        actions_url: format!("{}/actions", mirror_href(&m.name)),
        error: None,
        wait,
        not_catching_up,
        failback_cost,
        groups_ready: groups.len() - groups_not_ready,
        can_break_glass: !approval_note.is_empty() && viewer.role.allows(crate::auth::Role::Admin),
        approval_note,
        reason_required,
        groups,
        groups_not_ready,
    }
}

/// One topic of a failback preview: the lineage it adopts and what each partition copies.
#[derive(Debug, Clone)]
pub struct FailbackTopicView {
    pub name: String,
    pub from_mirror: String,
    pub records: String,
    /// (partition, from offset, to offset, records), formatted.
    pub rows: Vec<(i32, String, String, String)>,
}

/// The preview a dashboard start shows before it runs when some of its topics are failbacks
/// (issue 18): what each copies, and a typed confirmation like a failover's.
#[derive(Debug, Clone)]
pub struct FailbackPreviewView {
    pub mirror: String,
    pub title: String,
    pub topics: Vec<FailbackTopicView>,
    /// Topics of the same call that start normally (no lineage on the source).
    pub others: Vec<String>,
    pub total: String,
    pub confirm_word: String,
    pub confirm_pattern: String,
    pub csrf: String,
    pub actions_url: String,
    /// The call's topics and truncation mode, submitted again with the confirmation.
    pub names: String,
    pub truncation: String,
    pub back: String,
}

/// The failback preview of a start of `topics` on mirror `mirror`, from the engine's
/// `validate_only` answer; `None` when no topic is a failback (the start just runs).
pub fn failback_preview(
    mirror: &str,
    preview: &crate::engine::OpResult,
    truncation: &str,
    back: &str,
    viewer: &Viewer,
) -> Option<FailbackPreviewView> {
    if preview.failback.is_empty() {
        return None;
    }
    let topics: Vec<FailbackTopicView> = preview
        .failback
        .iter()
        .map(|(name, f)| FailbackTopicView {
            name: name.clone(),
            from_mirror: f.from_mirror.clone(),
            records: format::int(f.records()),
            rows: f
                .partitions
                .iter()
                .map(|p| (p.partition, format::int(p.from_offset), format::int(p.to_offset), format::int(p.records)))
                .collect(),
        })
        .collect();
    let others: Vec<String> =
        preview.results.iter().map(|r| r.topic.clone()).filter(|t| !preview.failback.contains_key(t)).collect();
    let all: Vec<String> = preview.results.iter().map(|r| r.topic.clone()).collect();
    let total: i64 = preview.failback.values().map(|f| f.records()).sum();
    let confirm_word = if all.len() == 1 { all[0].clone() } else { mirror.to_string() };
    let title = if topics.len() == 1 {
        format!("Fail back: {}", topics[0].name)
    } else {
        format!("Fail back: {} topics", topics.len())
    };
    Some(FailbackPreviewView {
        mirror: mirror.to_string(),
        title,
        topics,
        others,
        total: format::int(total),
        confirm_pattern: format::exact_pattern(&confirm_word),
        confirm_word,
        csrf: viewer.csrf.clone(),
        actions_url: format!("{}/actions", mirror_href(mirror)),
        names: all.join(" "),
        truncation: truncation.to_string(),
        back: back.to_string(),
    })
}

/// One partition of a topic's lineage, formatted.
#[derive(Debug, Clone)]
pub struct LineageRow {
    pub partition: i32,
    pub state: &'static str,
    pub last_copied: String,
    pub stop: String,
    pub lme: String,
    pub runs: String,
}

/// A lineage found in the source cluster's state.
#[derive(Debug, Clone)]
pub struct LineageFound {
    pub source_mirror: String,
    pub problem: Option<String>,
    pub partitions: Vec<LineageRow>,
}

/// The topic page's lineage section (issue 18): what the source cluster's state says about the
/// topic's way back.
#[derive(Debug, Clone)]
pub struct LineageView {
    pub mirror: String,
    pub topic: String,
    pub topic_href: String,
    pub lineage: Option<LineageFound>,
}

pub fn lineage(mirror: &str, topic: &str, l: Option<&crate::engine::TopicLineage>) -> LineageView {
    let opt = |o: Option<i64>| o.map_or_else(|| "–".to_string(), format::int);
    LineageView {
        mirror: mirror.to_string(),
        topic: topic.to_string(),
        topic_href: topic_href(mirror, topic),
        lineage: l.map(|l| LineageFound {
            source_mirror: l.source_mirror.clone(),
            problem: l.problem.clone(),
            partitions: l
                .partitions
                .iter()
                .map(|p| LineageRow {
                    partition: p.partition,
                    state: p.state.as_str(),
                    last_copied: opt(p.last_mirrored_offset),
                    stop: opt(p.source_stop_offset),
                    lme: p.last_mirror_epoch.map_or_else(|| "–".to_string(), |e| e.to_string()),
                    runs: format::count(p.offset_map_runs),
                })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preview_of(failback: &[(&str, i64)], others: &[&str]) -> crate::engine::OpResult {
        use crate::domain::lineage::{FailbackCopy, FailbackPreview};
        let mut results = Vec::new();
        let mut fb = std::collections::BTreeMap::new();
        for (t, n) in failback {
            results.push(crate::engine::TopicOutcome { topic: t.to_string(), ok: true, error: None });
            let partitions = vec![
                FailbackCopy { partition: 0, from_offset: 1_000, to_offset: 1_000 + n, records: *n },
                FailbackCopy { partition: 1, from_offset: 980, to_offset: 980, records: 0 },
            ];
            fb.insert(t.to_string(), FailbackPreview { from_mirror: "m1".into(), partitions });
        }
        for t in others {
            results.push(crate::engine::TopicOutcome { topic: t.to_string(), ok: true, error: None });
        }
        crate::engine::OpResult {
            operation_id: "op-1".into(),
            results,
            quarantined: Default::default(),
            failback: fb,
            saved_pattern: None,
            notes: Default::default(),
            behind: Default::default(),
        }
    }

    #[test]
    fn a_start_that_fails_back_is_previewed_and_confirmed_with_the_topic_name() {
        let viewer = Viewer::new(
            &crate::auth::Identity { name: "alice".into(), role: crate::auth::Role::Operator },
            "csrf",
            false,
        );
        // No failback in the answer: the start runs at once.
        assert!(failback_preview("m2", &preview_of(&[], &["orders"]), "none", "/m", &viewer).is_none());
        let one = failback_preview("m2", &preview_of(&[("orders", 300)], &[]), "none", "/m", &viewer).unwrap();
        assert_eq!(one.confirm_word, "orders");
        assert_eq!(one.total, "300");
        assert_eq!(one.topics[0].from_mirror, "m1");
        assert_eq!(one.topics[0].rows[0], (0, "1,000".to_string(), "1,300".to_string(), "300".to_string()));
        // Several topics (one of them an ordinary start): the mirror's name confirms them all.
        let two = failback_preview("m2", &preview_of(&[("orders", 300), ("pay", 5)], &["new"]), "none", "/m", &viewer)
            .unwrap();
        assert_eq!(two.confirm_word, "m2");
        assert_eq!(two.total, "305");
        assert_eq!(two.others, vec!["new".to_string()]);
        assert_eq!(two.names, "orders pay new");
        let html = crate::ui::pages::failback_preview(two, &viewer, true).unwrap();
        assert!(html.contains(r#"name="failback_confirmed" value="1""#) && html.contains(r#"pattern="m2""#), "{html}");
        assert!(html.contains("305 records") && html.contains("incremental failback from mirror"), "{html}");
    }

    fn partition(p: i32, state: PartitionState, lag: i64, secs: f64) -> PartitionSnapshot {
        PartitionSnapshot {
            failed_in: None,
            resync_pending: false,
            idle: false,
            topic: "orders".into(),
            partition: p,
            state,
            state_since: crate::domain::Timestamp::EPOCH,
            state_epoch: 1,
            source_log_start_offset: Some(0),
            source_last_stable_offset: Some(100 + lag),
            source_high_watermark: Some(100 + lag),
            mirrored_source_offset: Some(100),
            destination_high_watermark: Some(100),
            lag_records: lag,
            lag_seconds: secs,
            last_mirrored_epoch: None,
            error: None,
            retry_count: 0,
            next_retry_at: None,
            records_mirrored: 0,
            bytes_mirrored: 0,
            destination_stop_offset: None,
            local_writes: 0,
            source_writes_after_stop: None,
            slot: 0,
            owner: None,
        }
    }

    /// The failover dialog shows the stop impact `validate_only` of a stop answers with: the same
    /// computation (`TopicSnapshot::stop_impact`), per partition and in total.
    #[test]
    fn the_failover_dialog_shows_the_stop_impact() {
        let topic = TopicSnapshot {
            name: "orders".into(),
            state: PartitionState::Mirroring,
            source_topic_id: String::new(),
            destination_topic_id: String::new(),
            lag_records: 8,
            lag_seconds: 10.0,
            partitions: vec![
                // A STOPPED partition has nothing a stop would leave behind, whatever its offsets say.
                partition(2, PartitionState::Stopped, 4, 1.0),
                partition(0, PartitionState::Mirroring, 5, 2.5),
                partition(1, PartitionState::Paused, 3, 10.0),
            ],
            failback_mirror: None,
        };
        let impact = topic.stop_impact();
        assert_eq!((impact.records, impact.seconds), (8, 10.0));
        let per: Vec<(i32, i64, f64)> = impact.partitions.iter().map(|p| (p.partition, p.records, p.seconds)).collect();
        assert_eq!(per, [(0, 5, 2.5), (1, 3, 10.0), (2, 0, 0.0)]);
        let m = MirrorSnapshot {
            name: "m".into(),
            source_bootstrap_servers: "x:1".into(),
            cluster_id_status: crate::engine::ClusterIdStatus::Ok,
            data_path: crate::engine::DataPathStatus::Running,
            topics: vec![topic],
            ..MirrorSnapshot::default()
        };
        let viewer = Viewer::new(
            &crate::auth::Identity { name: "alice".into(), role: crate::auth::Role::Operator },
            "csrf",
            false,
        );
        let v = confirm(&m, None, UiOp::Failover, &["orders".to_string()], &viewer);
        let t = &v.topics[0];
        assert_eq!((t.lag_records.as_str(), t.lag_seconds.as_str()), ("8", format::secs(10.0).as_str()));
        assert_eq!((v.total_lag_n, v.total_lag_seconds.as_str()), (8, format::secs(10.0).as_str()));
        let rows: Vec<(i32, &str, &str, bool)> =
            t.rows.iter().map(|r| (r.partition, r.lag_records.as_str(), r.lag_seconds.as_str(), r.warn)).collect();
        let (s25, s10, s0) = (format::secs(2.5), format::secs(10.0), format::secs(0.0));
        assert_eq!(rows, [(0, "5", s25.as_str(), true), (1, "3", s10.as_str(), true), (2, "0", s0.as_str(), false)]);
    }

    #[test]
    fn the_failover_dialog_says_what_a_later_failback_costs() {
        let caught_up = failback_cost(0, 1_000_000);
        assert!(caught_up.contains("only what is written here after the failover"), "{caught_up}");
        assert!(caught_up.contains("no full copy"), "{caught_up}");
        let behind = failback_cost(3_603, 1_250_000);
        assert!(behind.contains("3,603 records not mirrored"), "{behind}");
        assert!(behind.contains("DESTINATION_DIVERGED") && behind.contains("up to 1,250,000 records"), "{behind}");
        assert!(behind.contains("quarantine"), "{behind}");
    }
}

/// A mirror topic's configs beside its source topic's (the topic page's "Topic configs").
#[derive(Debug, Clone)]
pub struct ConfigsView {
    pub mirror: String,
    pub topic: String,
    pub topic_href: String,
    pub rows: Vec<ConfigRowView>,
    /// Configs the next sync changes.
    pub differs: usize,
}

#[derive(Debug, Clone)]
pub struct ConfigRowView {
    pub name: String,
    pub source: String,
    pub destination: String,
    /// What the sync sets, for copied configs that differ; else empty.
    pub wanted: String,
    pub css: &'static str,
    pub label: &'static str,
}

pub fn configs(mirror: &str, topic: &str, rows: &[crate::engine::ConfigRow]) -> ConfigsView {
    use crate::engine::ConfigStatus;
    let value = |v: &Option<String>| v.clone().unwrap_or_else(|| "(default)".to_string());
    ConfigsView {
        mirror: mirror.to_string(),
        topic: topic.to_string(),
        topic_href: topic_href(mirror, topic),
        differs: rows.iter().filter(|r| r.status == ConfigStatus::Differs).count(),
        rows: rows
            .iter()
            .map(|r| {
                let (css, label) = match r.status {
                    ConfigStatus::InSync => ("ok", "in sync"),
                    ConfigStatus::Differs => ("warn", "next sync sets it"),
                    ConfigStatus::NotCopied => ("muted", "not copied"),
                };
                ConfigRowView {
                    name: r.name.clone(),
                    source: value(&r.source),
                    destination: value(&r.destination),
                    wanted: if r.status == ConfigStatus::Differs { value(&r.wanted) } else { String::new() },
                    css,
                    label,
                }
            })
            .collect(),
    }
}
