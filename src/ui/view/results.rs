//! The outcome of an action, per topic (`templates/fragments/results.html`): shown inline on the
//! mirror and partitions pages after an action, and per topic in the operations lists.

use crate::engine::{OperationView, TopicOutcome};

use super::common::{operation_href, topic_href};

#[derive(Debug, Clone)]
pub struct OutcomeView {
    pub topic: String,
    pub href: String,
    pub ok: bool,
    pub title: String,
    pub detail: String,
}

pub(super) fn outcome_view(mirror: &str, o: &TopicOutcome) -> OutcomeView {
    OutcomeView {
        topic: o.topic.clone(),
        href: topic_href(mirror, &o.topic),
        ok: o.ok,
        title: o.error.as_ref().map_or_else(|| "accepted".to_string(), |e| e.kind.title().to_string()),
        detail: o.error.as_ref().map(|e| e.detail.clone()).unwrap_or_default(),
    }
}

/// The outcome of an action just taken, shown inline above the table.
#[derive(Debug, Clone)]
pub struct ResultsView {
    pub title: String,
    pub operation_href: String,
    pub ok: usize,
    pub failed: usize,
    pub items: Vec<OutcomeView>,
    pub css: &'static str,
}

pub fn results(mirror: &str, op_label: &str, operation_id: &str, outcomes: &[TopicOutcome]) -> ResultsView {
    let items: Vec<OutcomeView> = outcomes.iter().map(|o| outcome_view(mirror, o)).collect();
    let ok = items.iter().filter(|i| i.ok).count();
    let failed = items.len() - ok;
    ResultsView {
        title: match (ok, failed) {
            (0, 0) => format!("{op_label}: no topics matched"),
            (_, 0) => format!("{op_label}: accepted for {ok} topic{}", if ok == 1 { "" } else { "s" }),
            (0, _) => format!("{op_label}: refused for {failed} topic{}", if failed == 1 { "" } else { "s" }),
            _ => format!("{op_label}: {ok} accepted, {failed} refused"),
        },
        operation_href: operation_href(operation_id),
        css: if failed == 0 && ok > 0 {
            "ok"
        } else if ok == 0 {
            "bad"
        } else {
            "warn"
        },
        ok,
        failed,
        items,
    }
}

impl ResultsView {
    /// Adds what the engine said about accepted topics beyond "accepted" (e.g. FAILED partitions
    /// a pause leaves FAILED until they are retried).
    #[must_use]
    pub fn with_notes(mut self, notes: &std::collections::BTreeMap<String, String>) -> ResultsView {
        for i in &mut self.items {
            if let Some(n) = notes.get(&i.topic).filter(|_| i.ok) {
                i.detail = n.clone();
            }
        }
        self
    }
}

/// Results rebuilt from a recorded operation (after a redirect, without JavaScript).
pub fn results_of(o: &OperationView) -> ResultsView {
    results(&o.mirror, o.kind.label(), &o.id, &o.results)
}
