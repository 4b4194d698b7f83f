//! View models: display-ready data built from the engine [`Snapshot`] and the operations log.
//!
//! Pure: no I/O, no clock (`now` is an argument), no axum. Templates only print these fields,
//! so every number, duration and URL is formatted here, once, and tested without a browser.
//! Filtering, sorting and paging happen here too, on the snapshot in memory: a page of 100 rows
//! out of 10,000 partitions costs one pass and one sort of references.
//!
//! One file per page of `templates/pages/` that has a view model (`overview`, `mirror`,
//! `partitions`, `confirm`, `operations`, `operation`, `instances`); the sign-in, new-mirror and error pages
//! take plain fields (`super::pages`). Pieces several pages share are in `common` (visitor,
//! parameters, badges, paging), `health` (cluster ID and sync), `actions` (the lifecycle actions
//! offered) and `results` (an action's outcome per topic).

mod actions;
mod chart;
mod common;
mod confirm;
mod health;
mod instances;
mod mirror;
mod operation;
mod operations;
mod overview;
mod partitions;
mod policy;
mod results;
mod safety;

pub use actions::*;
pub use chart::*;
pub use common::*;
pub use confirm::*;
pub use health::*;
pub use instances::*;
pub use mirror::*;
pub use operation::*;
pub use operations::*;
pub use overview::*;
pub use partitions::*;
pub use policy::*;
pub use results::*;
pub use safety::*;
