//! One operation's page (`templates/pages/operation.html`).

use crate::domain::Timestamp;
use crate::engine::{OperationView, Snapshot};

use super::common::{Freshness, operation_href};
use super::operations::{OperationRow, operation_row};

#[derive(Debug, Clone)]
pub struct OperationDetailView {
    pub op: OperationRow,
    pub fresh: Freshness,
    pub live_url: String,
}

pub fn operation_detail(snap: &Snapshot, o: &OperationView, now: Timestamp) -> OperationDetailView {
    OperationDetailView {
        op: operation_row(o, snap, now),
        fresh: Freshness::new(snap.taken_at, now),
        live_url: format!("/ui{}", operation_href(&o.id)),
    }
}
