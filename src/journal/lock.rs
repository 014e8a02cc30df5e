//! The recovery lock: one recovery run at a time per journal, across processes and hosts (two
//! overlapping cron jobs, a host's own recovery and `slotpartner recover`).
//!
//! A row in `sp_journal_locks` (see `admin::take_lock`) on both backends rather than SQLite's
//! file lock or a PostgreSQL advisory lock: a session-level advisory lock would pin one pooled
//! connection for the whole run and vanish silently with it, while a row names its holder and
//! since when (what the second run prints) and, held under a lease, lapses by itself when its
//! holder dies without releasing it. A run renews the lease as it goes.
//!
//! A holder on this host is also judged by what the host knows: its holder text names its
//! process (`pid P on HOST (run R, process B:S)`, B this boot's identity, S the process's start
//! in the kernel's ticks since boot), and a run finding the lock held by a process of this host
//! that is gone (no such process, or another process under the same id, or another boot) takes
//! it over at once instead of waiting out the lease: a run killed with SIGKILL holds up nothing.
//! A holder on another host (or one that names no process this way) is judged by its lease alone.

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

/// The holder text of process `pid` of this host taking a lock as `who`: `who, pid P on HOST
/// (run R, process B:S)`, R random (two runs of one process are two holders), B this boot's
/// identity and S the process's start (see the module's documentation); without `, process
/// B:S` where the host does not tell them (no `/proc`).
pub fn holder_text(who: &str, pid: u32) -> Result<String> {
    let run = super::hex::hex(&super::claims::new_token()?[..4]);
    let process = match (boot_id(), process_start(pid)) {
        (Some(boot), Some(start)) => format!(", process {boot}:{start}"),
        _ => String::new(),
    };
    Ok(format!("{who}, pid {pid} on {} (run {run}{process})", host_name()))
}

/// Whether `holder` (a holder text of `holder_text`) names a process of this host that is gone:
/// no process has its id now, or the one that has started at another time, or it was of
/// another boot. `false` when it cannot be known: another host, no `/proc`, another format.
pub(crate) fn holder_is_gone(holder: &str) -> bool {
    let Some((pid, host, boot, start)) = parse_holder(holder) else { return false };
    if host != host_name() {
        return false;
    }
    let Some(this_boot) = boot_id() else { return false };
    if boot != this_boot {
        return true;
    }
    if !std::path::Path::new("/proc/self/stat").exists() {
        return false;
    }
    process_start(pid) != Some(start)
}

/// The process id, host, boot and start a holder text names.
fn parse_holder(holder: &str) -> Option<(u32, &str, &str, u64)> {
    let (_, rest) = holder.rsplit_once(", pid ")?;
    let (pid, rest) = rest.split_once(" on ")?;
    let (host, rest) = rest.rsplit_once(" (run ")?;
    let (_, process) = rest.strip_suffix(')')?.split_once(", process ")?;
    let (boot, start) = process.split_once(':')?;
    Some((pid.parse().ok()?, host, boot, start.parse().ok()?))
}

/// This boot's identity (`/proc/sys/kernel/random/boot_id`, its first 8 hex digits).
fn boot_id() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id: String = text.trim().chars().filter(char::is_ascii_hexdigit).take(8).collect();
    (id.len() == 8).then_some(id)
}

/// When process `pid` started, in the kernel's ticks since boot (field 22 of `/proc/PID/stat`,
/// read after the command name, which may hold spaces and parentheses); `None` when no such
/// process is there.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_text_names_its_process_and_reads_back() {
        let holder = holder_text("slotpartner recover", std::process::id()).unwrap();
        let (pid, host, boot, start) = parse_holder(&holder).expect(&holder);
        assert_eq!((pid, host), (std::process::id(), host_name().as_str()));
        assert_eq!((Some(boot.to_owned()), Some(start)), (boot_id(), process_start(std::process::id())));
        assert!(!holder_is_gone(&holder), "this process is alive: {holder}");
        // Another host's, an unknown format's: not judged here.
        let elsewhere = holder.replace(&format!(" on {} (", host_name()), " on elsewhere.example (");
        assert!(!holder_is_gone(&elsewhere));
        assert!(!holder_is_gone("slotpartner check probe"));
        // The same id under another start, or of another boot: gone.
        let reused = holder.replace(&format!(":{start})"), &format!(":{})", start + 1));
        assert!(holder_is_gone(&reused), "{reused}");
        let earlier_boot = holder.replace(&format!("process {boot}:"), "process 00000000:");
        assert!(holder_is_gone(&earlier_boot), "{earlier_boot}");
    }
}
