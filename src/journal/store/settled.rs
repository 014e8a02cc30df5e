//! What a process remembers of a journal it found current, so that opening it again (PHP-FPM
//! opens one for every request) can read nothing: with `claim_at_finish` only, whose every
//! `begin` reads the schema version with the key (`current_at_claim`), so that a journal moved
//! to another schema meanwhile is refused at the claim rather than at the open.

use std::sync::{Mutex, PoisonError};

use crate::error::{Error, ErrorKind, Result};

use super::schema;
use super::{Found, JournalOptions, Prepare};

/// The `first_index` an open that creates or migrates found the journal current with, once one
/// did (kept for the life of the process, beside the journal's connections).
#[derive(Default)]
pub(crate) struct Settled(Mutex<Option<Option<i64>>>);

impl Settled {
    /// Whether this open may skip its reads: it creates or migrates, claims at finish, and the
    /// process found the journal current with the same `first_index` before.
    pub(crate) fn skips(&self, options: &JournalOptions, prepare: Prepare) -> bool {
        prepare == Prepare::CreateOrMigrate
            && options.claim_at_finish
            && *self.0.lock().unwrap_or_else(PoisonError::into_inner) == Some(options.first_index)
    }

    /// Remembers what an open that read the journal found.
    pub(crate) fn note(&self, options: &JournalOptions, prepare: Prepare, found: &Found) {
        if prepare == Prepare::CreateOrMigrate && *found == Found::Current {
            *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(options.first_index);
        }
    }
}

/// Refuses, at a claim, a journal whose schema version is not this release's (`version` read
/// with the key): a newer one as the open would, an older one (another release's, restored
/// meanwhile) asking for the open that migrates it.
pub(crate) fn current_at_claim(label: &str, version: Option<i64>) -> Result<()> {
    match schema::check_version(label, version)? {
        None => Ok(()),
        Some(older) => Err(Error::new(
            ErrorKind::Journal,
            format!(
                "{label}: the journal has schema version {older}, older than this release's (version {}); open it again to migrate it",
                schema::VERSION
            ),
        )),
    }
}
