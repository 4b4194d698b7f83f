//! kmirror: cluster mirroring for Apache Kafka following the KIP-1279 design.
//!
//! Layout (DESIGN.md section 2): `domain` is pure logic; `kafka` is the only code that uses
//! rdkafka; `data_path` is a slot's copy loop written against two ports (a source fetcher, a
//! transactional writer) that `kafka` implements; `store` is the `__mirror_state` codec; `engine`
//! applies the state machine to real
//! clusters; `api` and `ui` talk to the engine only through its handle and snapshot, and share
//! what they both show through `presentation` (wire types, the incident report), never each
//! other; `app` composes them.
pub mod api;
pub mod app;
pub mod app_state;
pub mod auth;
pub mod clock;
pub mod config;
pub mod data_path;
pub mod demo;
pub mod domain;
pub mod engine;
pub mod format;
pub mod history;
pub mod kafka;
pub mod presentation;
pub mod store;
pub mod ui;
