//! The storage backends and their connection handling, the middle layer: SQLite (`sqlite`) and
//! PostgreSQL (`postgres`) behind the `Store` trait, and what they share: the tables (`schema`),
//! one statement interface (`sql`) and the bookkeeping written once over it (`admin`), the lock
//! rows' holders (`lock`), connections kept per process (`pool`) and across `fork`
//! (`fork_guard`), one writer at a time (`write_gate`), what a process remembers of a journal it
//! found current (`settled`), this boot's identity (`boot`), online backup (`backup`) and files
//! written whole (`new_file`).

pub(super) mod admin;
pub(super) mod backup;
mod boot;
pub(crate) mod fork_guard;
pub(super) mod lock;
pub(super) mod new_file;
mod pool;
pub(super) mod postgres;
pub(super) mod schema;
mod settled;
pub(super) mod sql;
pub(super) mod sqlite;
mod write_gate;

// What this layer's files name as `super::...` from the layer below, the delivery model.
use super::model::key::Delivery;
use super::model::time::rfc3339_ms;
use super::model::{claims, gaps, hex, key, staged};

// The contract the journal's API (`journal/mod.rs`) declares for its backends: the `Store` trait
// and the types its methods speak. The one thing this layer names from above; never `Journal`.
use super::{
    Access, AdminWork, Begin, Found, JournalOptions, Prepare, Record, Step, Store, Synchronous, count, now_ms,
};

use backup::BackupReport;
