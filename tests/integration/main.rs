//! The one integration test binary. Every test here runs against the real Apache Kafka clusters
//! started by `scripts/kafka-rig` (see `support.rs` for how they are found).

// Tests stamp records with the wall clock themselves (clippy.toml's rule is for kmirror).
#![allow(clippy::disallowed_methods)]

mod access;
mod alerts;
mod api;
mod approvals;
mod cli;
mod client;
mod discovery;
mod docs;
mod drills;
mod engine;
mod failback;
mod history;
mod instances;
mod kafka_admin;
mod membership;
mod metadata;
mod promote;
mod quarantine;
mod responsiveness;
mod secured;
mod support;
mod ui;
