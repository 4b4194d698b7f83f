//! What the REST API and the dashboard both present, below both: the wire types ([`dto`]) and
//! the incident report ([`report`]). Built from the engine's snapshot, the history and the
//! operation log only; nothing here knows about routes, extractors or authentication, so `api`
//! and `ui` can both use it without importing each other.

pub mod dto;
pub mod report;
