//! The recovery lock: one recovery run at a time per journal, across processes and hosts (two
//! overlapping cron jobs, a host's own recovery and `slotpartner recover`).
//!
//! A row in `sp_journal_locks` (see `admin::take_lock`) on both backends rather than SQLite's
//! file lock or a PostgreSQL advisory lock: a session-level advisory lock would pin one pooled
//! connection for the whole run and vanish silently with it, while a row names its holder and
//! since when (what the second run prints) and, held under a lease, lapses by itself when its
//! holder dies without releasing it. A run renews the lease as it goes.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

use super::Journal;

/// The name of the lock every recovery run takes.
pub const RECOVERY_LOCK: &str = "recover";

/// The lock `Journal::export` holds while it pages through the deliveries; `Journal::prune`
/// waits for it (see `PruneReport::stopped_by`).
pub const EXPORT_LOCK: &str = "export";

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
        let run = super::hex::hex(&super::claims::new_token()?[..4]);
        let holder = format!("{who}, pid {} on {} (run {run})", std::process::id(), host_name());
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

/// This host's name (the kernel's, else `/etc/hostname`, else the environment's), on one line.
pub fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .chain(["HOSTNAME", "COMPUTERNAME"].iter().filter_map(|name| std::env::var(name).ok()))
        .map(|name| name.split_whitespace().collect::<Vec<_>>().join(" "))
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "an unnamed host".to_owned())
}
