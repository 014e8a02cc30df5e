//! The recovery lock as a recovery run holds it: taken, renewed as the run goes, released when
//! dropped. What the lock is (a row naming its holder, under a lease) and how its holder is
//! judged: `store/lock.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

use super::Journal;
use super::lock::{RECOVERY_LOCK, holder_text};

/// The recovery lock, held until dropped (released then; if the release fails, it lapses with
/// its lease).
#[derive(Debug)]
pub struct RecoveryLock {
    journal: Arc<Journal>,
    holder: String,
    /// The process that took it: a forked child dropping its copy leaves it to the parent.
    pid: u32,
}

impl RecoveryLock {
    /// Takes the lock for `lease` as `who` (the holder others see is `who, pid P on HOST (run
    /// R)`, R random: two recoveries of one process are two runs). Fails with `Busy` naming the
    /// run that holds it and since when.
    pub fn take(journal: Arc<Journal>, who: &str, lease: Duration) -> Result<RecoveryLock> {
        let holder = holder_text(who, std::process::id())?;
        match journal.take_lock(RECOVERY_LOCK, &holder, lease) {
            Ok(()) => Ok(RecoveryLock { journal, holder, pid: std::process::id() }),
            Err(error) if error.kind == ErrorKind::Busy => {
                let held = error.message.strip_prefix("lock: ").unwrap_or(&error.message);
                Err(Error::new(
                    ErrorKind::Busy,
                    format!("another recovery run holds the journal's lock, so this one does not start: {held}"),
                ))
            }
            Err(error) => Err(error),
        }
    }

    /// Extends the lease to `lease` from now.
    pub fn renew(&self, lease: Duration) -> Result<()> {
        self.journal.take_lock(RECOVERY_LOCK, &self.holder, lease)
    }

    /// Who holds it: `who, pid P on HOST (run R)`.
    pub fn holder(&self) -> &str {
        &self.holder
    }
}

impl Drop for RecoveryLock {
    fn drop(&mut self) {
        if self.pid == std::process::id() {
            let _ = self.journal.release_lock(RECOVERY_LOCK, &self.holder);
        }
    }
}
