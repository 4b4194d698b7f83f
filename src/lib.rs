//! kmirror: cluster mirroring for Apache Kafka following the KIP-1279 design.
pub mod domain;
pub mod engine;
pub mod kafka;
pub mod store;
