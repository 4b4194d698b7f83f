//! The mirror page's Topic policy card (the policy and what discovery found and did) and the
//! preview of a policy change.

use crate::domain::Timestamp;
use crate::domain::topic_policy::Plan;
use crate::engine::MirrorSnapshot;

use super::common::When;
use crate::format;

/// At most this many names per list on the card (the API lists them all).
const SHOWN: usize = 20;

/// A list of names, the first [`SHOWN`] of them.
#[derive(Debug, Clone, Default)]
pub struct NameList {
    pub names: Vec<String>,
    /// How many more there are.
    pub more: usize,
}

impl NameList {
    fn of(all: impl IntoIterator<Item = String>) -> NameList {
        let all: Vec<String> = all.into_iter().collect();
        let more = all.len().saturating_sub(SHOWN);
        NameList { names: all.into_iter().take(SHOWN).collect(), more }
    }
}

/// A topic and why.
#[derive(Debug, Clone)]
pub struct TopicWhy {
    pub topic: String,
    pub why: String,
}

/// The Topic policy card.
#[derive(Debug, Clone)]
pub struct PolicyView {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    /// Some include pattern: discovery starts topics.
    pub active: bool,
    /// The include and exclude lists as the edit form shows them (one pattern per line).
    pub include_text: String,
    pub exclude_text: String,
    pub runs_on: String,
    pub runs_here: bool,
    pub last_run: Option<When>,
    pub last_run_detail: String,
    pub last_error: Option<String>,
    pub matched: String,
    pub mirrored: String,
    pub to_start: NameList,
    pub starting: Option<String>,
    pub refused: Vec<TopicWhy>,
    pub refused_more: usize,
    pub excluded: Vec<TopicWhy>,
    pub excluded_more: usize,
    pub taken: Vec<TopicWhy>,
    /// Where the edit form posts.
    pub post_url: String,
}

/// The card of mirror `m`.
pub fn policy(m: &MirrorSnapshot, href: &str, now: Timestamp) -> PolicyView {
    let d = &m.discovery;
    let plan = d.plan.as_deref().cloned().unwrap_or_default();
    let mirrored = plan.matched.iter().filter(|t| m.topic(t).is_some()).count();
    let why = |v: Vec<(String, String)>| -> (Vec<TopicWhy>, usize) {
        let more = v.len().saturating_sub(SHOWN);
        (v.into_iter().take(SHOWN).map(|(topic, why)| TopicWhy { topic, why }).collect(), more)
    };
    let (refused, refused_more) = why(d
        .refused
        .iter()
        .map(|(t, r)| (t.clone(), format!("{} (since {})", r.detail, format::ago(now, r.since))))
        .collect());
    let (excluded, excluded_more) = why(plan.excluded.clone());
    let (taken, _) = why(plan.taken.iter().map(|(t, other)| (t.clone(), format!("mirror {other} holds it"))).collect());
    PolicyView {
        include: m.topic_include.clone(),
        exclude: m.topic_exclude.clone(),
        active: !m.topic_include.is_empty(),
        include_text: m.topic_include.join("\n"),
        exclude_text: m.topic_exclude.join("\n"),
        runs_on: d.runs_on.clone().unwrap_or_else(|| "no instance yet".into()),
        runs_here: d.runs_here,
        last_run: d.last_run_at.map(|t| When::new(now, Some(t))),
        last_run_detail: match (d.topics_seen, d.last_run_ms) {
            (Some(n), Some(ms)) => format!("{} source topics listed in {ms} ms", format::count(n)),
            _ => String::new(),
        },
        last_error: d.last_error.clone(),
        matched: format::count(plan.matched.len()),
        mirrored: format::count(mirrored),
        to_start: NameList::of(plan.start),
        starting: d.starting.map(format::count),
        refused,
        refused_more,
        excluded,
        excluded_more,
        taken,
        post_url: format!("{href}/policy"),
    }
}

/// What a policy change would do now.
#[derive(Debug, Clone)]
pub struct PolicyPreviewView {
    pub mirror: String,
    pub href: String,
    pub include_text: String,
    pub exclude_text: String,
    pub would_start: NameList,
    pub would_stop: Vec<TopicWhy>,
    pub matched: String,
    pub taken: Vec<TopicWhy>,
    pub post_url: String,
    pub csrf: String,
}

/// The preview of `include` / `exclude` for mirror `mirror`.
pub fn policy_preview(
    mirror: &str,
    href: &str,
    include: &[String],
    exclude: &[String],
    plan: &Plan,
    csrf: &str,
) -> PolicyPreviewView {
    PolicyPreviewView {
        mirror: mirror.to_string(),
        href: href.to_string(),
        include_text: include.join("\n"),
        exclude_text: exclude.join("\n"),
        would_start: NameList::of(plan.start.clone()),
        would_stop: plan.stop.iter().map(|(t, p)| TopicWhy { topic: t.clone(), why: format!("matches {p}") }).collect(),
        matched: format::count(plan.matched.len()),
        taken: plan
            .taken
            .iter()
            .map(|(t, other)| TopicWhy { topic: t.clone(), why: format!("mirror {other} holds it") })
            .collect(),
        post_url: format!("{href}/policy"),
        csrf: csrf.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{DiscoverySnapshot, ProblemKind, Refusal};
    use std::sync::Arc;

    #[test]
    fn the_card_says_what_discovery_found_and_why_it_left_topics_out() {
        let plan = Plan {
            start: vec!["orders.new".into()],
            matched: vec!["orders.a".into(), "orders.new".into(), "orders.tmp".into(), "orders.x".into()],
            excluded: vec![("orders.tmp".into(), "matches topic_exclude pattern \"orders\\\\.tmp\"".into())],
            taken: vec![("orders.x".into(), "other".into())],
            ..Plan::default()
        };
        let m = MirrorSnapshot {
            name: "m".into(),
            topic_include: vec![r"orders\..*".into()],
            topic_exclude: vec!["__.*".into()],
            discovery: DiscoverySnapshot {
                runs_on: Some("kmirror-0".into()),
                runs_here: true,
                last_run_at: Some(Timestamp::from_millis(10_000)),
                last_run_ms: Some(12),
                topics_seen: Some(40),
                plan: Some(Arc::new(plan)),
                refused: vec![(
                    "orders.legacy".into(),
                    Refusal {
                        kind: ProblemKind::DestinationTopicConflict,
                        detail: "destination topic \"orders.legacy\" already holds records".into(),
                        since: Timestamp::from_millis(0),
                        tried_at: Timestamp::from_millis(5_000),
                    },
                )],
                ..DiscoverySnapshot::default()
            },
            ..MirrorSnapshot::default()
        };
        let v = policy(&m, "/mirrors/m", Timestamp::from_millis(70_000));
        assert!(v.active);
        assert_eq!(v.include_text, r"orders\..*");
        assert_eq!(v.to_start.names, vec!["orders.new".to_string()]);
        assert_eq!((v.matched.as_str(), v.mirrored.as_str()), ("4", "0"));
        assert_eq!(v.refused.len(), 1);
        assert!(v.refused[0].why.contains("already holds records"), "{:?}", v.refused);
        assert_eq!(v.excluded[0].topic, "orders.tmp");
        assert_eq!(v.taken[0].why, "mirror other holds it");
        assert_eq!(v.last_run_detail, "40 source topics listed in 12 ms");
        assert_eq!(v.post_url, "/mirrors/m/policy");
    }
}
