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
//! process (`pid P on HOST (run R, process B:N:S)`, B this boot's identity, N its PID namespace,
//! S the process's start in the kernel's ticks since boot), and a run of the same host name, boot
//! and PID namespace finding the lock held by a process that is gone (no such process, or
//! another process under the same id) takes it over at once instead of waiting out the lease: a
//! run killed with SIGKILL holds up nothing. Any other holder is judged by its lease alone: of
//! another boot (an earlier boot of this host cannot be told from another host of the same
//! name), of another PID namespace (a container, whose process ids mean other processes here),
//! of another host name, or one that names no process this way.

use crate::error::Result;

/// The name of the lock every recovery run takes.
pub const RECOVERY_LOCK: &str = "recover";

/// The lock `Journal::export` holds while it pages through the deliveries; `Journal::prune`
/// waits for it (see `PruneReport::stopped_by`).
pub const EXPORT_LOCK: &str = "export";

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

/// The holder text of process `pid` of this host (in this PID namespace) taking a lock as
/// `who`: `who, pid P on HOST (run R, process B:N:S)`, R random (two runs of one process are two
/// holders), B this boot's identity, N the PID namespace and S the process's start (see the
/// module's documentation); without `, process B:N:S` where the host does not tell them (no
/// `/proc`).
pub fn holder_text(who: &str, pid: u32) -> Result<String> {
    let run = super::hex::hex(&super::claims::new_token()?[..4]);
    let process = match (boot_id(), pid_namespace(), process_start(pid)) {
        (Some(boot), Some(namespace), Some(start)) => format!(", process {boot}:{namespace}:{start}"),
        _ => String::new(),
    };
    Ok(format!("{who}, pid {pid} on {} (run {run}{process})", host_name()))
}

/// Whether `holder` (a holder text of `holder_text`) names a process that is gone, as far as
/// this process can know: same host name, boot and PID namespace, and no process has its id
/// now, or the one that has started at another time. `false` whenever it cannot be known.
pub(crate) fn holder_is_gone(holder: &str) -> bool {
    let Some(named) = parse_holder(holder) else { return false };
    let here = (Some(host_name()), boot_id(), pid_namespace());
    if here != (Some(named.host.to_owned()), Some(named.boot.to_owned()), Some(named.namespace)) {
        return false;
    }
    if !std::path::Path::new("/proc/self/stat").exists() {
        return false;
    }
    process_start(named.pid) != Some(named.start)
}

/// What a holder text names of its process.
struct Named<'a> {
    pid: u32,
    host: &'a str,
    boot: &'a str,
    namespace: u64,
    start: u64,
}

fn parse_holder(holder: &str) -> Option<Named<'_>> {
    let (_, rest) = holder.rsplit_once(", pid ")?;
    let (pid, rest) = rest.split_once(" on ")?;
    let (host, rest) = rest.rsplit_once(" (run ")?;
    let (_, process) = rest.strip_suffix(')')?.split_once(", process ")?;
    let mut parts = process.split(':');
    let (boot, namespace, start) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some(Named { pid: pid.parse().ok()?, host, boot, namespace: namespace.parse().ok()?, start: start.parse().ok()? })
}

/// This process's PID namespace (the inode of `/proc/self/ns/pid`): process ids are judged only
/// within it.
fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// This boot's identity (`boot::boot_id`), its first 8 hex digits.
fn boot_id() -> Option<String> {
    let id: String = super::boot::boot_id().ok()?.chars().filter(char::is_ascii_hexdigit).take(8).collect();
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
        let named = parse_holder(&holder).expect(&holder);
        assert_eq!((named.pid, named.host), (std::process::id(), host_name().as_str()));
        assert_eq!(
            (Some(named.boot.to_owned()), Some(named.namespace), Some(named.start)),
            (boot_id(), pid_namespace(), process_start(std::process::id()))
        );
        assert!(!holder_is_gone(&holder), "this process is alive: {holder}");
        // The same id under another start: gone.
        let start = named.start;
        let reused = holder.replace(&format!(":{start})"), &format!(":{})", start + 1));
        assert!(holder_is_gone(&reused), "{reused}");
        // Another host's, another boot's (another host of this name, or an earlier boot), another
        // PID namespace's, an unknown format's: not judged here, even with the id reused.
        let elsewhere = reused.replace(&format!(" on {} (", host_name()), " on elsewhere.example (");
        assert!(!holder_is_gone(&elsewhere));
        let other_boot = reused.replace(&format!("process {}:", named.boot), "process 00000000:");
        assert!(!holder_is_gone(&other_boot), "{other_boot}");
        let other_namespace = reused.replace(&format!(":{}:", named.namespace), ":1:");
        assert!(!holder_is_gone(&other_namespace), "{other_namespace}");
        assert!(!holder_is_gone("slotpartner check probe"));
    }
}
