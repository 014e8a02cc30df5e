//! The operator's work on a journal, beside its API at the top: retention (`prune`), the export
//! of handled deliveries and its files (`export`, `export_format`), and recovery of lost events
//! (`recovery`) with the lock a run holds (`recovery_lock`). `Journal`'s operator methods run it, and it holds a `Journal`.

pub(super) mod export;
pub(super) mod export_format;
pub(super) mod prune;
pub mod recovery;
pub(super) mod recovery_lock;

// What this layer's files name as `super::...`: from the layers below, and the `Journal` beside.
use super::model::{claims, hex, key};
use super::store::{admin, lock, new_file, sql};
use super::{Journal, rfc3339_ms};
