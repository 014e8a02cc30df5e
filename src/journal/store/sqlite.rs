//! The SQLite journal: one file in WAL mode that every process and thread of a host shares.
//!
//! Every call is one transaction; those that write start with `BEGIN IMMEDIATE`, so that
//! writers queue on SQLite's lock (up to the busy time-out) instead of failing on upgrade; the
//! threads of one process queue first on a gate of their own (`write_gate`), which wakes the next
//! writer the moment the lock is free instead of after SQLite's sleeps. Claims
//! are written with `synchronous=NORMAL`, stored replies with the configured level (`FULL` by
//! default), which in WAL mode also makes every earlier claim durable.
//!
//! Leases (a claim's `lease_until_ms`, a lock's `until_ms`) are set and judged by the host's
//! `CLOCK_BOOTTIME` (see `lease_clock`), never by the wall clock: every process sharing the file
//! runs on this host, so they all read the one boot clock, and a step of the wall clock (NTP, a
//! resumed virtual machine) neither hands a live claim to another worker nor keeps a dead one
//! beyond its lease. The times kept for people (`created_ms`, `updated_ms`, `finished_ms`, ...)
//! stay wall-clock times.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::error::{Error, ErrorKind, Result};

use super::admin::{self, ConflictSeen, JumpKind};
use super::claims::{self, Claim, Decision, Existing, RecordState, Unwritten};
use super::gaps::{self, Run, Runs};
use super::key::{self, Delivery};
use super::pool::{Pool, Registry};
use super::schema::{self, Counter};
use super::settled::{self, Settled};
use super::sql::{LeaseClock, Sql, SqlRow, Value};
use super::staged::{self, SqlValue, Staged};
use super::write_gate::WriteGate;
use super::{Access, AdminWork, Begin, Found, JournalOptions, Prepare, Record, Step, Synchronous, now_ms};

/// The statements a connection keeps prepared (rusqlite's cache, the least recently used
/// dropped), a partner's staged statements among them: those of `begin` and `finish`, their
/// transaction's and a fold's together. With rusqlite's default of 16, every fold (each
/// `FOLD_EVERY` rows) pushed a dozen of `begin`'s and `finish`'s out, prepared again after it.
const STATEMENT_CACHE: usize = 32;

/// Open files by path as given (`sqlite:PATH`), kept for the life of the process.
static REGISTRY: Registry<String, Sqlite> = Registry::new();

pub(crate) struct Sqlite {
    path: PathBuf,
    /// `sqlite:PATH`, for messages.
    label: String,
    pool: Pool<Conn>,
    /// This process's writers, one at a time.
    writers: WriteGate,
    /// What an open found: an open with `claim_at_finish` skips the reads a process made
    /// already (PHP-FPM opens the journal for every request); its every `begin` reads the
    /// schema version with the key (`holds`).
    settled: Settled,
    /// See `Store::numbering_hint`.
    numbering_hint: std::sync::atomic::AtomicI64,
}

struct Conn {
    db: Connection,
    synchronous: Option<Synchronous>,
    lock_timeout: Duration,
    /// The file it opened (device and inode), to find it replaced under it (`connection`).
    file: Option<(u64, u64)>,
}

/// The device and inode of the file at `path` (following links), `None` when there is none.
fn file_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A failure inside a transaction: SQLite's, or the journal's own.
enum Fail {
    Db(rusqlite::Error),
    Journal(Error),
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Db(e)
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Journal(e)
    }
}

type TxResult<T> = std::result::Result<T, Fail>;

impl Sqlite {
    pub fn open(path: &str, options: &JournalOptions, prepare: Prepare) -> Result<(Arc<Sqlite>, Found)> {
        // `sqlite:///abs/path` and `sqlite://rel/path` as well as `sqlite:PATH`.
        let path = path.strip_prefix("//").unwrap_or(path);
        if path.is_empty() || path == ":memory:" || path.starts_with("file:") {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "journal_url",
                "expected sqlite:PATH naming a file that every worker can share (not :memory: or a file: URI)",
            ));
        }
        let store = REGISTRY.get_or_make(path.to_owned(), || {
            Ok(Sqlite {
                path: PathBuf::from(path),
                label: format!("sqlite:{path}"),
                pool: Pool::new(8),
                writers: WriteGate::default(),
                settled: Settled::default(),
                numbering_hint: std::sync::atomic::AtomicI64::new(0),
            })
        })?;
        if prepare == Prepare::Existing {
            let found = store.peek(options)?;
            if found != Found::Current {
                return Ok((store, found));
            }
        }
        if store.settled.skips(options, prepare) {
            return Ok((store, Found::Current));
        }
        let found = store.prepare(options, prepare)?;
        store.settled.note(options, prepare, &found);
        Ok((store, found))
    }

    /// What the file holds, read with a read-only connection that neither creates the file nor
    /// writes to it (a read-write connection would write SQLite's header into an empty file when
    /// it sets WAL mode): no journal, a journal of an older schema version, or a current one.
    /// Another program's database and a newer schema version are refused, as `prepare` refuses
    /// them.
    fn peek(&self, options: &JournalOptions) -> Result<Found> {
        match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Found::Absent(format!("{}: no such file", self.label)));
            }
            Err(e) => return Err(Error::new(ErrorKind::Journal, format!("{}: cannot read the file: {e}", self.label))),
            Ok(meta) if !meta.is_file() => {
                return Err(Error::new(
                    ErrorKind::Journal,
                    format!("{}: not a regular file; a journal needs a file of its own", self.label),
                ));
            }
            Ok(meta) if meta.len() == 0 => {
                return Ok(Found::Absent(format!("{}: an empty file, no sp_journal_meta", self.label)));
            }
            Ok(_) => {}
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = Connection::open_with_flags(&self.path, flags).map_err(|e| self.error(&e))?;
        db.busy_timeout(options.lock_timeout).map_err(|e| self.error(&e))?;
        self.check_identity(&db)?;
        if !has_meta(&db).map_err(|e| self.error(&e))? {
            return Ok(Found::Absent(format!("{}: no sp_journal_meta in the database", self.label)));
        }
        let version = meta(&db, "schema_version").map_err(|e| self.error(&e))?;
        Ok(match schema::check_version(&self.label, version)? {
            Some(older) => Found::Older(older),
            None => Found::Current,
        })
    }

    /// Creates the tables if absent, checks the schema version (migrating an older one), stores
    /// a configured first index; with `Prepare::Existing`, reports a missing journal or an older
    /// version instead of creating or migrating it (the file exists: see `peek`).
    fn prepare(&self, options: &JournalOptions, prepare: Prepare) -> Result<Found> {
        let create = prepare == Prepare::CreateOrMigrate;
        let mut conn = self.connection(options, create)?;
        let result = (|| -> TxResult<Found> {
            let db = &mut conn.db;
            if !has_meta(db)? {
                if !create {
                    return Ok(Found::Absent(format!("{}: no sp_journal_meta in the database", self.label)));
                }
                let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if !has_meta(&tx)? {
                    // Version 3's tables, made version 4's in the same transaction.
                    tx.execute_batch(schema::SQLITE)?;
                    add_later_versions(&tx)?;
                    admin::migrate(&mut SqliteSql { tx: &tx, label: &self.label }, 3)?;
                    tx.pragma_update(None, "application_id", schema::APPLICATION_ID)?;
                }
                tx.commit()?;
            }
            let version = meta(db, "schema_version")?;
            if let Some(older) = schema::check_version(&self.label, version)? {
                if !create {
                    return Ok(Found::Older(older));
                }
                let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if let Some(from) = schema::check_version(&self.label, meta(&tx, "schema_version")?)? {
                    add_later_versions(&tx)?;
                    admin::migrate(&mut SqliteSql { tx: &tx, label: &self.label }, from)?;
                    tx.pragma_update(None, "application_id", schema::APPLICATION_ID)?;
                }
                tx.commit()?;
            }
            if let Some(first) = options.first_index {
                if meta(db, "numbering")?.unwrap_or(1) == 1 && meta(db, "first_index")? != Some(first) {
                    db.execute(
                        "INSERT INTO sp_journal_meta (key, value) VALUES ('first_index', ?1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        [first],
                    )?;
                }
            }
            Ok(Found::Current)
        })();
        self.done(&mut conn, result)
    }

    /// A read-write connection; `create`: creating the file when it does not exist (else a
    /// missing file fails, for `Journal::open_existing`).
    fn connect_as(&self, options: &JournalOptions, create: bool) -> Result<Conn> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            self.create_private()?;
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let db = Connection::open_with_flags(&self.path, flags).map_err(|e| self.error(&e))?;
        db.busy_timeout(options.lock_timeout).map_err(|e| self.error(&e))?;
        db.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        self.check_identity(&db)?;
        if db.is_readonly(rusqlite::MAIN_DB).map_err(|e| self.error(&e))? {
            return Err(Error::new(
                ErrorKind::Journal,
                format!("{}: the file is read-only for this user; a journal must be writable", self.label),
            ));
        }
        // Freed pages of a new journal go back to the file system with `prune` (see
        // `Journal::prune`). SQLite takes this only on an empty file, before WAL mode is set;
        // on a file holding tables it changes nothing.
        db.pragma_update(None, "auto_vacuum", "INCREMENTAL").map_err(|e| self.error(&e))?;
        let mode = self.wal_mode(&db, options)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::new(
                ErrorKind::Journal,
                format!(
                    "{}: cannot use WAL mode (journal_mode is {mode}); put the journal on a local file system",
                    self.label
                ),
            ));
        }
        Ok(Conn { db, synchronous: None, lock_timeout: options.lock_timeout, file: file_identity(&self.path) })
    }

    /// A connection to the file at the journal's path now: a kept one unless the path names
    /// another file than the one it opened (the journal was restored or replaced under this
    /// process: the kept connection would go on writing into the old, unlinked file), else a
    /// new one (`create` as `connect_as`). One `stat` a call. A path with no file at all fails,
    /// unless `create`, rather than a kept connection writing where nobody reads.
    fn connection(&self, options: &JournalOptions, create: bool) -> Result<super::pool::Pooled<'_, Conn>> {
        for _ in 0..32 {
            let mut conn = self.pool.get(|| self.connect_as(options, create))?;
            match file_identity(&self.path) {
                Some(now) if conn.file == Some(now) => return Ok(conn),
                Some(_) => conn.mark_broken(),
                None if create => conn.mark_broken(),
                None => {
                    conn.mark_broken();
                    return Err(Error::new(
                        ErrorKind::Journal,
                        format!(
                            "{}: the journal's file is gone (moved or removed while this process had it open); nothing was written",
                            self.label
                        ),
                    ));
                }
            }
        }
        Err(Error::new(
            ErrorKind::Journal,
            format!("{}: the journal's file keeps changing under this process", self.label),
        ))
    }

    /// Creates the journal's file readable and writable by its owner only (0600), when it does
    /// not exist yet: it holds player identifiers and replies. SQLite gives the `-wal` and
    /// `-shm` files the database file's mode. To share a journal between users (workers and the
    /// operator command), give the file, and the folder, a common group and mode 0660 yourself.
    fn create_private(&self) -> Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        if self.path.exists() {
            return Ok(());
        }
        // `create`, not `create_new`: through a dangling symbolic link too, the file it names is
        // created 0600 (SQLite would create it with the umask's mode).
        match std::fs::OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(&self.path) {
            Ok(file) if file.metadata().is_ok_and(|m| m.is_file()) => Ok(()),
            Ok(_) => Err(Error::new(
                ErrorKind::Journal,
                format!("{}: not a regular file; a journal needs a file of its own", self.label),
            )),
            Err(e) => Err(Error::new(
                ErrorKind::Journal,
                format!(
                    "{}: cannot open the file to create it: {e} (check that its folder exists and is writable)",
                    self.label
                ),
            )),
        }
    }

    /// Refuses a database that is not a journal: one marked by another program's
    /// `application_id`, or holding tables but no journal (a journal of schema version 1, from
    /// before the mark, is recognised by its tables and marked when migrated). Checked before
    /// anything is written, so another program's file is left exactly as it was.
    fn check_identity(&self, db: &Connection) -> Result<()> {
        let id: i64 = db.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(|e| self.error(&e))?;
        if id == schema::APPLICATION_ID {
            return Ok(());
        }
        let tables: Vec<String> = db
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(|e| self.error(&e))?;
        let is_journal = tables.iter().any(|t| t == "sp_journal_meta");
        if id == 0 && (tables.is_empty() || is_journal) {
            return Ok(());
        }
        let what = if id != 0 {
            format!("application_id {id:#x}, not a slotpartner journal's")
        } else {
            let shown: Vec<&str> = tables.iter().take(5).map(String::as_str).collect();
            format!("tables {} and no journal", shown.join(", "))
        };
        Err(Error::field(
            ErrorKind::InvalidArgument,
            "journal_url",
            format!(
                "{} holds another program's database ({what}); a journal needs a file of its own: nothing was changed",
                self.label
            ),
        ))
    }

    /// Puts the file in WAL mode (kept in the file, so usually found set already), and answers the
    /// mode in force. Switching needs the file to itself, and SQLite answers busy at once rather
    /// than through the busy handler, so another process creating the journal at the same moment
    /// is waited for here, up to `lock_timeout`.
    fn wal_mode(&self, db: &Connection, options: &JournalOptions) -> Result<String> {
        let deadline = std::time::Instant::now() + options.lock_timeout;
        loop {
            let current: String = db.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(|e| self.error(&e))?;
            if current.eq_ignore_ascii_case("wal") {
                return Ok(current);
            }
            match db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
                Err(e)
                    if matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => return other.map_err(|e| self.error(&e)),
            }
        }
    }

    /// A clear `Journal` error for a SQLite failure.
    fn error(&self, e: &rusqlite::Error) -> Error {
        let hint = match e.sqlite_error_code() {
            Some(ErrorCode::ReadOnly) => " (the file or its folder is read-only for this user)",
            Some(ErrorCode::NotADatabase) => " (the file is not a SQLite journal)",
            Some(ErrorCode::DatabaseCorrupt) => " (the file is damaged)",
            Some(ErrorCode::DiskFull) => " (the disk is full)",
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                " (another process held the journal longer than lock_timeout)"
            }
            Some(ErrorCode::CannotOpen) => " (cannot open the file: check that its folder exists and is writable)",
            _ => "",
        };
        Error::new(ErrorKind::Journal, format!("{}: {e}{hint}", self.label))
    }

    /// The result of work on `conn`, dropping the connection when SQLite failed.
    fn done<T>(&self, conn: &mut super::pool::Pooled<'_, Conn>, result: TxResult<T>) -> Result<T> {
        match result {
            Ok(value) => Ok(value),
            Err(Fail::Journal(e)) => Err(e),
            Err(Fail::Db(e)) => {
                conn.mark_broken();
                Err(self.error(&e))
            }
        }
    }

    /// Runs `work` in one transaction (`BEGIN IMMEDIATE` when `write`, through this process's
    /// write gate), `durable` choosing the configured synchronous level over `NORMAL`.
    fn transaction<T>(
        &self,
        options: &JournalOptions,
        write: bool,
        durable: bool,
        work: impl FnOnce(&Connection) -> TxResult<T>,
    ) -> Result<T> {
        let _pass = if write { self.writers.enter(options.lock_timeout) } else { None };
        let mut conn = self.connection(options, false)?;
        let result = (|| {
            let conn = &mut *conn;
            if conn.lock_timeout != options.lock_timeout {
                conn.db.busy_timeout(options.lock_timeout)?;
                conn.lock_timeout = options.lock_timeout;
            }
            let synchronous = if durable { options.synchronous } else { Synchronous::Normal };
            if conn.synchronous != Some(synchronous) {
                let level = match synchronous {
                    Synchronous::Full => "FULL",
                    Synchronous::Normal => "NORMAL",
                };
                conn.db.pragma_update(None, "synchronous", level)?;
                conn.synchronous = Some(synchronous);
            }
            let tx = Began::begin(&conn.db, write)?;
            let value = work(tx.db)?;
            tx.commit()?;
            Ok(value)
        })();
        self.done(&mut conn, result)
    }
}

/// A transaction of `Sqlite::transaction`, begun and committed by statements kept in the
/// connection's statement cache: rusqlite's `Transaction` prepares `BEGIN` and `COMMIT` anew
/// each time. Borrows the connection for its life; dropped without `commit`, or after a commit
/// that failed, it rolls back what is still open, as rusqlite's `Transaction` does.
struct Began<'c> {
    db: &'c Connection,
}

impl<'c> Began<'c> {
    /// `BEGIN IMMEDIATE` when `write` (the write lock taken now, waited for up to the busy
    /// time-out), else `BEGIN DEFERRED`.
    fn begin(db: &'c Connection, write: bool) -> rusqlite::Result<Began<'c>> {
        let sql = if write { "BEGIN IMMEDIATE" } else { "BEGIN DEFERRED" };
        db.prepare_cached(sql)?.execute([])?;
        Ok(Began { db })
    }

    fn commit(self) -> rusqlite::Result<()> {
        self.db.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

impl Drop for Began<'_> {
    fn drop(&mut self) {
        // Open still: the work failed, or its commit did (the connection is then dropped from the
        // pool as well: `done`). A statement of the work that ended the transaction left none.
        if !self.db.is_autocommit() {
            let _ = self.db.execute_batch("ROLLBACK");
        }
    }
}

/// Runs the partner's staged statements in order inside `tx` (the transaction of `finish`);
/// the first failure names its statement, and the caller's rollback undoes them all.
fn run_staged(tx: &Connection, staged: &[Staged]) -> TxResult<()> {
    use rusqlite::types::Value as Bound;
    for (at, statement) in staged.iter().enumerate() {
        let bound = statement.params().iter().map(|value| match value {
            SqlValue::Null => Bound::Null,
            SqlValue::Int(v) => Bound::Integer(*v),
            SqlValue::Text(v) => Bound::Text(v.clone()),
            SqlValue::Blob(v) => Bound::Blob(v.clone()),
        });
        // Run to its end, rows (a RETURNING clause, a SELECT) read and dropped.
        let ran = tx.prepare_cached(statement.sql()).and_then(|mut prepared| {
            let mut rows = prepared.query(rusqlite::params_from_iter(bound))?;
            while rows.next()?.is_some() {}
            Ok(())
        });
        if let Err(e) = ran {
            return Err(Fail::Journal(staged::failed(at + 1, statement, &e.to_string())));
        }
        if tx.is_autocommit() {
            // Ended the transaction in a way the check at staging did not see: the reply is
            // not stored after it.
            return Err(Fail::Journal(staged::escaped()));
        }
    }
    Ok(())
}

/// Makes the tables of version 3 (`schema::SQLITE`) or any later version this release's, before
/// the data steps of `admin::migrate`: each step changes nothing made already.
fn add_later_versions(tx: &Connection) -> rusqlite::Result<()> {
    add_v2(tx)?;
    add_v3(tx)?;
    add_v4(tx)?;
    add_v5(tx)?;
    tx.execute_batch(schema::SQLITE_V6)?;
    if has_column(tx, "sp_journal_counters", "in_flight")? {
        tx.execute_batch(schema::V6_COUNTERS)?;
    }
    Ok(())
}

/// Creates what version 2 adds (`schema::SQLITE_V2`, then each of `schema::SQLITE_V2_COLUMNS`
/// its table lacks), on a new journal and by the migration from version 1; a migration run again
/// (a version put back to 1 by hand) adds nothing twice.
fn add_v2(tx: &Connection) -> rusqlite::Result<()> {
    tx.execute_batch(schema::SQLITE_V2)?;
    add_columns(tx, schema::SQLITE_V2_COLUMNS)
}

/// Creates what version 3 adds (`schema::SQLITE_V3_COLUMNS`, then `schema::SQLITE_V3`), as
/// `add_v2` does for version 2.
fn add_v3(tx: &Connection) -> rusqlite::Result<()> {
    add_columns(tx, schema::SQLITE_V3_COLUMNS)?;
    tx.execute_batch(schema::SQLITE_V3)
}

/// Makes the changes of version 4 (`schema::SQLITE_V4_HANDLED`) while the counters still have
/// version 3's `handled` column: a migration run again (a version put back by hand) changes
/// nothing twice.
fn add_v4(tx: &Connection) -> rusqlite::Result<()> {
    if has_column(tx, "sp_journal_counters", "handled")? {
        tx.execute_batch(schema::SQLITE_V4_HANDLED)?;
    }
    Ok(())
}

/// Makes the changes of version 5 (`schema::SQLITE_V5_COLUMNS`, `schema::SQLITE_V5`, and
/// `schema::V5_COUNTERS` while the counters still have version 4's `handled_offset`), as
/// `add_v4` does for version 4.
fn add_v5(tx: &Connection) -> rusqlite::Result<()> {
    add_columns(tx, schema::SQLITE_V5_COLUMNS)?;
    tx.execute_batch(schema::SQLITE_V5)?;
    if has_column(tx, "sp_journal_counters", "handled_offset")? {
        tx.execute_batch(schema::V5_COUNTERS)?;
    }
    Ok(())
}

/// Whether `table` has `column`.
fn has_column(tx: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    let sql = "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2";
    Ok(tx.query_row(sql, [table, column], |r| r.get::<_, i64>(0))? > 0)
}

/// Adds each column (table, column, type) its table lacks (SQLite has no `ADD COLUMN IF NOT
/// EXISTS`).
fn add_columns(tx: &Connection, columns: &[(&str, &str, &str)]) -> rusqlite::Result<()> {
    for (table, column, kind) in columns {
        if !has_column(tx, table, column)? {
            tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}"))?;
        }
    }
    Ok(())
}

/// Closes every idle connection of every SQLite journal of this process, without the checkpoint
/// SQLite runs when the last connection to a file closes (the WAL stays for the next opener).
/// Called before a fork while no thread is inside the journal (see `fork_guard`): with no
/// connection open, SQLite keeps no per-file lock state for the child to inherit.
pub(crate) fn close_idle_connections() {
    for store in REGISTRY.values() {
        for conn in store.pool.drain() {
            let _ = conn.db.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
            drop(conn);
        }
    }
}

/// Whether the database holds the journal's `sp_journal_meta`.
fn has_meta(db: &Connection) -> rusqlite::Result<bool> {
    db.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sp_journal_meta'", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n > 0)
}

fn meta(db: &Connection, key: &str) -> rusqlite::Result<Option<i64>> {
    db.prepare_cached("SELECT value FROM sp_journal_meta WHERE key = ?1")?.query_row([key], |r| r.get(0)).optional()
}

fn bump(tx: &Connection, counter: Counter, by: i64) -> rusqlite::Result<()> {
    tx.prepare_cached(counter.sqlite_update())?.execute(params![0, by])?;
    Ok(())
}

/// Records `index` as seen, noting an index jump (see `JournalOptions::max_index_jump`) with the
/// delivery's key and name, after the rows not folded yet (so that the jump is judged against
/// every index seen before). Returns whether the index is new.
fn record_index(
    tx: &Connection,
    label: &str,
    index: i64,
    key: Option<&str>,
    name: Option<&str>,
    options: &JournalOptions,
) -> TxResult<bool> {
    fold(tx, label, options)?;
    let configured_first = || meta(tx, "first_index");
    if let Some(previous) = gaps::jump_of(&mut SqliteRuns(tx), index, configured_first, options.max_index_jump)? {
        let sql = &mut SqliteSql { tx, label };
        admin::record_jump(sql, JumpKind::Jump, index, Some(previous), key, name, None)?;
    }
    let new = gaps::add(&mut SqliteRuns(tx), index, index, gaps::Seen::at(now_ms()))?;
    Ok(new > 0)
}

/// Records `index`, carried by a delivery of `key` that the journal holds already (first
/// delivered at `held_at`), as seen only when it is that event's own: a repeat at the same
/// index (or of a key held without one). A key held at another index arriving with this one
/// is the service answering an index with another's event: the index is not counted seen,
/// it stays missing, and the anomaly is recorded for the operator (`JumpKind::Moved`).
fn record_if_own(
    tx: &Connection,
    label: &str,
    index: i64,
    key: &str,
    name: &str,
    held_at: Option<i64>,
    options: &JournalOptions,
) -> TxResult<()> {
    match held_at {
        Some(at) if at != index => {
            let sql = &mut SqliteSql { tx, label };
            admin::record_jump(sql, JumpKind::Moved, index, Some(at), Some(key), Some(name), None)?;
        }
        _ => {
            record_index(tx, label, index, Some(key), Some(name), options)?;
        }
    }
    Ok(())
}

/// The transaction writing a new delivery row folds the rows above `folded_id` (see `fold`)
/// once they number this many. Folding rewrites their pages (a few pages for every hundred rows,
/// whatever the batch); a smaller batch keeps what a read must fold first small.
const FOLD_EVERY: i64 = 128;

/// Another key than `?2` delivered at the index `?1`, among the folded rows, read through the
/// partial index `sp_journal_delivery_index_folded` (see `schema`, version 6).
const REUSED_BY: &str =
    "SELECT key FROM sp_journal_delivery WHERE first_index = ?1 AND folded = 1 AND key <> ?2 LIMIT 1";

/// `folded_id`: the newest row folded (see `schema`, version 5).
fn folded_id(tx: &Connection) -> rusqlite::Result<i64> {
    Ok(meta(tx, "folded_id")?.unwrap_or(0))
}

/// After the row `id` of a new delivery is written with `folded = 0` (its index, when it
/// carries one, merged into the runs when the row is folded, and judged a reused index then):
/// folds the rows not folded once they number `FOLD_EVERY`. For every such row, with an index
/// or without: inside the write transaction that wrote it.
fn note_row(tx: &Connection, label: &str, id: i64, options: &JournalOptions) -> TxResult<()> {
    let mark = folded_id(tx)?;
    if id <= mark {
        // Rows at the top were deleted (SQLite numbers the new row from the highest left): the
        // rows below this one are folded, none above it is left.
        tx.prepare_cached("UPDATE sp_journal_meta SET value = ?1 WHERE key = 'folded_id'")?.execute([id - 1])?;
    }
    if id - mark.min(id - 1) >= FOLD_EVERY {
        fold(tx, label, options)?;
    }
    Ok(())
}

/// Records an index jump of kind `Reused` for each of `rows` not folded yet (above `folded_id`,
/// in the order they were written) whose index came before with another key: on a row of `rows` written
/// before it, or, when the runs hold the index, on a folded row. Judged before `rows`' indexes
/// enter the runs, so exactly as each delivery would have judged its own when written: nothing
/// but a fold changes the runs (any other path folds first).
fn note_reused(tx: &Connection, label: &str, rows: &[FoldedRow]) -> TxResult<()> {
    let highest = SqliteRuns(tx).highest()?.map(|run| run.hi);
    let mut first_at: HashMap<i64, &str> = HashMap::new();
    for (_, index, _, key, name, unfolded) in rows {
        let Some(index) = *index else { continue };
        let earlier = *first_at.entry(index).or_insert(key.as_str());
        if !unfolded {
            // Folded already (a compact record `prune` wrote, or another release's row): judged
            // when its delivery came; an earlier row for the ones after it.
            continue;
        }
        let other: Option<String> = if earlier != key.as_str() {
            Some(earlier.to_owned())
        } else if highest.is_some_and(|hi| index <= hi)
            && SqliteRuns(tx).at_or_before(index)?.is_some_and(|run| run.hi >= index)
        {
            tx.prepare_cached(REUSED_BY)?.query_row(params![index, key], |r| r.get(0)).optional()?
        } else {
            None
        };
        if let Some(other) = other {
            let sql = &mut SqliteSql { tx, label };
            admin::record_jump(sql, JumpKind::Reused, index, None, Some(key), Some(name), Some(&other))?;
        }
    }
    Ok(())
}

/// A row `fold` reads: id, index, `created_ms`, key, name, and whether it is not folded.
type FoldedRow = (i64, Option<i64>, i64, String, String, bool);

/// Folds the rows above `folded_id`: merges the indexes of those not folded into the runs in
/// the order the rows were written, each dated by its row's `created_ms` and judged for an index
/// jump (noted with its row's key and name), marks them folded (the done ones enter
/// `sp_journal_delivery_done_folded`), and moves `folded_id` to the newest row. Inside a write
/// transaction; reads nothing more when no row is above `folded_id`.
fn fold(tx: &Connection, label: &str, options: &JournalOptions) -> TxResult<()> {
    let mark = folded_id(tx)?;
    let sql =
        "SELECT id, first_index, created_ms, key, name, folded = 0 FROM sp_journal_delivery WHERE id > ?1 ORDER BY id";
    let rows = tx
        .prepare_cached(sql)?
        .query_map([mark], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))?
        .collect::<rusqlite::Result<Vec<FoldedRow>>>()?;
    let Some(newest) = rows.last().map(|row| row.0) else {
        return Ok(());
    };
    note_reused(tx, label, &rows)?;
    // In the order the rows were written, as each delivery recorded its index until version 4
    // (so that a jump is judged against the indexes seen before it, whenever the fold runs).
    let arrived: Vec<(i64, i64, (&str, &str))> = rows
        .iter()
        .filter_map(|(_, index, at, key, name, unfolded)| {
            index.filter(|_| *unfolded).map(|index| (index, *at, (key.as_str(), name.as_str())))
        })
        .collect();
    let configured_first = meta(tx, "first_index")?;
    let jumps = gaps::add_arrived(&mut SqliteRuns(tx), &arrived, configured_first, options.max_index_jump)?;
    for (index, previous, (key, name)) in jumps {
        let sql = &mut SqliteSql { tx, label };
        admin::record_jump(sql, JumpKind::Jump, index, Some(previous), Some(key), Some(name), None)?;
    }
    tx.prepare_cached("UPDATE sp_journal_delivery SET folded = 1 WHERE id > ?1 AND folded = 0")?.execute([mark])?;
    tx.prepare_cached("UPDATE sp_journal_meta SET value = ?1 WHERE key = 'folded_id'")?.execute([newest])?;
    Ok(())
}

/// Whether a row above `folded_id` is to be folded.
fn unfolded(tx: &Connection) -> rusqlite::Result<bool> {
    let sql = "SELECT EXISTS (SELECT 1 FROM sp_journal_delivery WHERE id > COALESCE((SELECT value FROM sp_journal_meta WHERE key = 'folded_id'), 0))";
    tx.prepare_cached(sql)?.query_row([], |r| r.get(0))
}

/// Lowers `folded_id` to the highest row id when a delete left it above (SQLite numbers a new
/// row from the highest id left: it must not be taken as folded).
fn settle_folded_id(tx: &Connection) -> rusqlite::Result<()> {
    let sql = "UPDATE sp_journal_meta SET value = (SELECT COALESCE(MAX(id), 0) FROM sp_journal_delivery) WHERE key = 'folded_id' AND value > (SELECT COALESCE(MAX(id), 0) FROM sp_journal_delivery)";
    tx.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Refuses `verb` (finish, abandon) of a claim at finish handed out in a numbering a
/// renumbering has ended since: it would store a delivery of the old numbering into the new.
/// A journal another release migrated meanwhile is refused as `holds` refuses it (a claim of
/// `Journal::begin_optimistic` is handed out without reading the journal at all).
fn still_numbered(tx: &Connection, label: &str, claim: &Claim, unwritten: &Unwritten, verb: &str) -> TxResult<()> {
    // Both in one statement (as `holds` reads them).
    let sql = "SELECT (SELECT value FROM sp_journal_meta WHERE key = 'schema_version'), (SELECT value FROM sp_journal_meta WHERE key = 'numbering')";
    let (version, numbering) =
        tx.prepare_cached(sql)?.query_row([], |r| Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)))?;
    settled::current_at_claim(label, version)?;
    if numbering.unwrap_or(1) == unwritten.numbering {
        return Ok(());
    }
    Err(Fail::Journal(claims::renumbered_error(claim, verb, unwritten.numbering)))
}

/// Writes a delivery claimed at finish (`Claim::unwritten`) as `done` with `reply`, or as
/// `abandoned` when `reply` is `None`, recording its index, unless the key has a row by now:
/// whether it was written. Inside a write transaction.
fn write_unwritten(
    tx: &Connection,
    label: &str,
    claim: &Claim,
    unwritten: &Unwritten,
    reply: Option<&[u8]>,
    options: &JournalOptions,
) -> TxResult<bool> {
    let now = now_ms();
    let (state, finished) = match reply {
        Some(_) => (RecordState::Done, Some(now)),
        None => (RecordState::Abandoned, None),
    };
    let sql = "INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, attempts, created_ms, updated_ms, lease_until_ms, finished_ms, reply, folded) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?7, 0, ?8, ?9, 0) ON CONFLICT (key) DO NOTHING";
    let written = tx.prepare_cached(sql)?.execute(params![
        claim.key,
        unwritten.name,
        claim.transaction_id,
        claim.index,
        unwritten.content,
        state.as_str(),
        now,
        finished,
        reply
    ])?;
    if written == 0 {
        return Ok(false);
    }
    note_row(tx, label, tx.last_insert_rowid(), options)?;
    Ok(true)
}

/// The journal's statements over a SQLite transaction.
struct SqliteSql<'a> {
    tx: &'a Connection,
    label: &'a str,
}

impl SqliteSql<'_> {
    fn fail(&self, e: &rusqlite::Error) -> Error {
        Error::new(ErrorKind::Journal, format!("{}: {e}", self.label))
    }
}

fn sqlite_params(params: &[Value]) -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    params
        .iter()
        .map(|p| match p {
            Value::Int(Some(v)) => V::Integer(*v),
            Value::Text(Some(v)) => V::Text(v.clone()),
            Value::Int(None) | Value::Text(None) => V::Null,
        })
        .collect()
}

impl Sql for SqliteSql<'_> {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let params = sqlite_params(params);
        let changed = self
            .tx
            .prepare_cached(sql)
            .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(params)))
            .map_err(|e| self.fail(&e))?;
        Ok(changed as u64)
    }

    fn rows(&mut self, sql: &str, params: &[Value]) -> Result<Vec<SqlRow>> {
        use rusqlite::types::ValueRef;
        let params = sqlite_params(params);
        let read = || -> rusqlite::Result<Vec<SqlRow>> {
            let mut statement = self.tx.prepare_cached(sql)?;
            let columns = statement.column_count();
            let mut rows = statement.query(rusqlite::params_from_iter(params))?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let mut values = Vec::with_capacity(columns);
                for i in 0..columns {
                    values.push(match row.get_ref(i)? {
                        ValueRef::Integer(v) => Value::Int(Some(v)),
                        ValueRef::Text(t) => Value::Text(Some(String::from_utf8_lossy(t).into_owned())),
                        ValueRef::Real(v) => Value::Int(Some(v as i64)),
                        ValueRef::Blob(b) => Value::Text(Some(String::from_utf8_lossy(b).into_owned())),
                        ValueRef::Null => Value::Int(None),
                    });
                }
                out.push(values);
            }
            Ok(out)
        };
        read().map_err(|e| self.fail(&e))
    }

    fn now_ms(&mut self) -> Result<i64> {
        Ok(now_ms())
    }

    fn lease_clock(&mut self) -> Result<LeaseClock> {
        lease_clock(self.label)
    }
}

/// The lease clock on this host: `CLOCK_BOOTTIME` in ms (monotonic, counting a suspend, moved by
/// no step of the wall clock) and the boot it counts from, which every lease is stored with: a
/// lease of another boot is over (its worker did not outlive the boot), and so is one without a
/// boot (written by schema version 1, by the wall clock).
fn lease_clock(label: &str) -> Result<LeaseClock> {
    let boot = super::boot::boot_id().map_err(|e| {
        Error::new(
            ErrorKind::Journal,
            format!(
                "{label}: cannot read this boot's identity from {} ({e}); a SQLite journal's leases need it (they go by the boot's clock)",
                super::boot::BOOT_ID_FILE
            ),
        )
    })?;
    let since_boot = crate::ffi::clock::boot_time_ms().ok_or_else(|| {
        Error::new(ErrorKind::Journal, format!("{label}: the host has no CLOCK_BOOTTIME to judge leases by"))
    })?;
    Ok(LeaseClock { now_ms: since_boot, boot: Some(boot.to_owned()), wall_ms: now_ms() })
}

fn state(text: String) -> TxResult<RecordState> {
    Ok(RecordState::parse(&text)?)
}

/// The runs table inside a transaction.
struct SqliteRuns<'a>(&'a Connection);

fn run(row: &rusqlite::Row<'_>) -> rusqlite::Result<Run> {
    Ok(Run { lo: row.get(0)?, hi: row.get(1)? })
}

impl Runs for SqliteRuns<'_> {
    type Error = rusqlite::Error;

    fn at_or_before(&mut self, at: i64) -> rusqlite::Result<Option<Run>> {
        let sql = "SELECT lo, hi FROM sp_journal_runs WHERE lo <= ?1 ORDER BY lo DESC LIMIT 1";
        self.0.prepare_cached(sql)?.query_row([at], run).optional()
    }

    fn starting_within(&mut self, from: i64, to: i64) -> rusqlite::Result<Vec<Run>> {
        let sql = "SELECT lo, hi FROM sp_journal_runs WHERE lo >= ?1 AND lo <= ?2 ORDER BY lo";
        self.0.prepare_cached(sql)?.query_map([from, to], run)?.collect()
    }

    fn remove(&mut self, lo: i64) -> rusqlite::Result<()> {
        self.0.prepare_cached("DELETE FROM sp_journal_runs WHERE lo = ?1")?.execute([lo])?;
        Ok(())
    }

    fn put(&mut self, run: Run, seen: gaps::Seen) -> rusqlite::Result<()> {
        self.0.prepare_cached(schema::RUNS_PUT)?.execute(params![run.lo, run.hi, seen.first_ms, seen.last_ms])?;
        Ok(())
    }

    fn after(&mut self, after: i64, limit: usize) -> rusqlite::Result<Vec<Run>> {
        let sql = "SELECT lo, hi FROM sp_journal_runs WHERE lo > ?1 ORDER BY lo LIMIT ?2";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.0.prepare_cached(sql)?.query_map([after, limit], run)?.collect()
    }

    fn lowest(&mut self) -> rusqlite::Result<Option<Run>> {
        self.0.prepare_cached("SELECT lo, hi FROM sp_journal_runs ORDER BY lo LIMIT 1")?.query_row([], run).optional()
    }

    fn highest(&mut self) -> rusqlite::Result<Option<Run>> {
        let sql = "SELECT lo, hi FROM sp_journal_runs ORDER BY lo DESC LIMIT 1";
        self.0.prepare_cached(sql)?.query_row([], run).optional()
    }

    fn seen_below(&mut self, first: i64) -> rusqlite::Result<i64> {
        let sql = "SELECT COALESCE(SUM(MIN(hi, ?1 - 1) - lo + 1), 0) FROM sp_journal_runs WHERE lo < ?1";
        self.0.prepare_cached(sql)?.query_row([first], |r| r.get(0))
    }
}

/// `?7` the wall clock (for people), `?8` the lease's end on the lease clock, `?9` its boot.
/// `?10`: 0 (its index merged into the runs when the row is folded) when the claim records its
/// index, else 1.
const CLAIM_INSERT: &str = "INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, token, attempts, created_ms, updated_ms, lease_until_ms, lease_boot, folded) VALUES (?1, ?2, ?3, ?4, ?5, 'claimed', ?6, 1, ?7, ?7, ?8, ?9, ?10) ON CONFLICT (key) DO NOTHING";
const CLAIM_SELECT: &str = "SELECT content, state, attempts, lease_until_ms, reply, lease_boot, first_index, finished_ms IS NOT NULL FROM sp_journal_delivery WHERE key = ?1";
/// The content of a pruned delivery taken over by a repeat of the same decisive content.
const CLAIM_RESTORE_CONTENT: &str = "UPDATE sp_journal_delivery SET content = ?2 WHERE key = ?1";
const CLAIM_TAKE_OVER: &str = "UPDATE sp_journal_delivery SET state = 'claimed', token = ?2, attempts = ?3, updated_ms = ?4, lease_until_ms = ?5, lease_boot = ?6 WHERE key = ?1";
const STATE_SELECT: &str = "SELECT state, attempts FROM sp_journal_delivery WHERE key = ?1";

impl super::Store for Sqlite {
    fn quiet_for_fork(&self) -> bool {
        true
    }

    fn claim(&self, delivery: &Delivery, key: &str, first_look: bool, options: &JournalOptions) -> Result<Step> {
        let token = claims::new_token()?;
        self.transaction(options, true, false, |tx| {
            // The index a first look records, once it is known to be this event's (see `seen`).
            let index = delivery.index().filter(|_| first_look);
            let now = now_ms();
            let clock = lease_clock(&self.label)?;
            let lease_until = clock.until(options.lease_ms());
            let boot = clock.boot.as_deref();
            let claim = |attempt, differing, reply_pruned| Claim {
                key: key.to_owned(),
                token,
                attempt,
                index: delivery.index(),
                transaction_id: delivery.transaction_id(),
                differing,
                pid: std::process::id(),
                reply_pruned,
                unwritten: None,
            };
            let inserted = tx.prepare_cached(CLAIM_INSERT)?.execute(params![
                key,
                delivery.name(),
                delivery.transaction_id(),
                delivery.index(),
                delivery.stored(),
                &token[..],
                now,
                lease_until,
                boot,
                i64::from(!first_look)
            ])?;
            if inserted == 1 {
                bump(tx, Counter::InProgress, 1)?;
                note_row(tx, &self.label, tx.last_insert_rowid(), options)?;
                return Ok(Step::Answer(Begin::New(claim(1, Vec::new(), false))));
            }
            type Found = (String, String, i64, i64, Option<Vec<u8>>, Option<String>, Option<i64>, bool);
            let read = |r: &rusqlite::Row<'_>| -> rusqlite::Result<Found> {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
            };
            let (content, state_text, attempts, lease_until_ms, reply, lease_boot, held_at, finished_before) =
                tx.prepare_cached(CLAIM_SELECT)?.query_row([key], read)?;
            if let Some(index) = index {
                record_if_own(tx, &self.label, index, key, delivery.name(), held_at, options)?;
            }
            let first_content = key::from_stored(&content).into_owned();
            let existing = Existing {
                content: first_content.clone(),
                state: state(state_text)?,
                attempts,
                // On the lease clock; a lease of another boot or of none is over.
                lease_until_ms: if clock.runs(lease_until_ms, lease_boot.as_deref()) {
                    lease_until_ms
                } else {
                    i64::MIN
                },
                reply,
                now_ms: clock.now_ms,
                finished_before,
            };
            Ok(match claims::decide(existing, delivery) {
                Decision::Conflict { error, differing, stored } => {
                    let seen = ConflictSeen::of(delivery, key, &first_content, &differing, false);
                    let answered = admin::answer_conflict(&mut SqliteSql { tx, label: &self.label }, &seen)?;
                    if let (true, Some(stored)) = (answered, stored) {
                        bump(tx, Counter::Replayed, 1)?;
                        Step::Answer(Begin::Done(stored))
                    } else {
                        bump(tx, Counter::Conflicts, 1)?;
                        Step::Answer(Begin::Conflict(error))
                    }
                }
                Decision::Replay(reply) => {
                    bump(tx, Counter::Replayed, 1)?;
                    Step::Answer(Begin::Done(reply))
                }
                Decision::TakeOver { attempt, reopened, differing, pruned } => {
                    tx.prepare_cached(CLAIM_TAKE_OVER)?.execute(params![
                        key,
                        &token[..],
                        attempt,
                        now,
                        lease_until,
                        boot
                    ])?;
                    if reopened {
                        bump(tx, Counter::InProgress, 1)?;
                    }
                    if pruned {
                        // The digest matched: the full content comes back with this delivery.
                        tx.prepare_cached(CLAIM_RESTORE_CONTENT)?.execute(params![key, delivery.stored()])?;
                    }
                    if !differing.is_empty() {
                        bump(tx, Counter::Conflicts, 1)?;
                        admin::record_conflict(
                            &mut SqliteSql { tx, label: &self.label },
                            &ConflictSeen::of(delivery, key, &first_content, &differing, true),
                        )?;
                    }
                    Step::Answer(Begin::New(claim(attempt, differing, pruned)))
                }
                Decision::Held => Step::Held,
            })
        })
    }

    fn holds(&self, key: &str, options: &JournalOptions) -> Result<(bool, i64)> {
        let (held, numbering, version) = self.transaction(options, false, false, |tx| {
            let sql = "SELECT EXISTS (SELECT 1 FROM sp_journal_delivery WHERE key = ?1), (SELECT value FROM sp_journal_meta WHERE key = 'numbering'), (SELECT value FROM sp_journal_meta WHERE key = 'schema_version')";
            Ok(tx.prepare_cached(sql)?.query_row([key], |r| {
                Ok((r.get(0)?, r.get::<_, Option<i64>>(1)?.unwrap_or(1), r.get::<_, Option<i64>>(2)?))
            })?)
        })?;
        // The open may have skipped this check (see `Settled`).
        settled::current_at_claim(&self.label, version)?;
        Ok((held, numbering))
    }

    fn numbering_hint(&self) -> &std::sync::atomic::AtomicI64 {
        &self.numbering_hint
    }

    fn record_seen(&self, index: i64, options: &JournalOptions) -> Result<()> {
        self.transaction(options, true, false, |tx| record_index(tx, &self.label, index, None, None, options).map(drop))
    }

    fn finish(&self, claim: &Claim, reply: &[u8], staged: &[Staged], options: &JournalOptions) -> Result<()> {
        // The staged statements first, the reply after them: a statement that ended the
        // transaction (which the check at staging could not see) leaves the reply unstored. A
        // claim found not held rolls back whatever ran.
        let lost = |tx: &Connection| Err(Fail::Journal(claims::lost_error(claim, "finish", lost_state(tx, claim)?)));
        if let Some(unwritten) = &claim.unwritten {
            // Written nothing by `begin`: stored by another delivery meanwhile? (The write lock,
            // taken, keeps the key as it is to the commit.) Else the staged statements, then the
            // delivery, done.
            return self.transaction(options, true, true, |tx| {
                still_numbered(tx, &self.label, claim, unwritten, "finish")?;
                // Stored by a delivery of the same content with this very reply: the event is
                // handled once and this reply is its stored reply (its index recorded, counted
                // as a replay).
                // Its index only when it is the stored delivery's own (see `record_if_own`).
                let sql = "SELECT state = 'done' AND content = ?2 AND reply = ?3, first_index FROM sp_journal_delivery WHERE key = ?1";
                let alike = tx
                    .prepare_cached(sql)?
                    .query_row(params![claim.key, unwritten.content, reply], |r| {
                        Ok((r.get::<_, bool>(0)?, r.get::<_, Option<i64>>(1)?))
                    })
                    .optional()?;
                match alike {
                    Some((true, held_at)) => {
                        if let Some(index) = claim.index {
                            record_if_own(tx, &self.label, index, &claim.key, &unwritten.name, held_at, options)?;
                        }
                        bump(tx, Counter::Replayed, 1)?;
                        return Ok(());
                    }
                    Some((false, _)) => return lost(tx),
                    None => {}
                }
                run_staged(tx, staged)?;
                // Counted handled by its done row (see `schema::COUNTERS_SUM`).
                if !write_unwritten(tx, &self.label, claim, unwritten, Some(reply), options)? {
                    return lost(tx);
                }
                Ok(())
            });
        }
        self.transaction(options, true, true, |tx| {
            if !staged.is_empty() {
                // Still this worker's? (The write lock, taken, keeps it so to the commit.)
                let held = "SELECT count(*) FROM sp_journal_delivery WHERE key = ?1 AND state = 'claimed' AND token = ?2";
                if tx.prepare_cached(held)?.query_row(params![claim.key, &claim.token[..]], |r| r.get::<_, i64>(0))? == 0 {
                    return lost(tx);
                }
            }
            run_staged(tx, staged)?;
            let sql = "UPDATE sp_journal_delivery SET state = 'done', reply = ?3, token = NULL, updated_ms = ?4, finished_ms = ?4 WHERE key = ?1 AND state = 'claimed' AND token = ?2";
            if tx.prepare_cached(sql)?.execute(params![claim.key, &claim.token[..], reply, now_ms()])? != 1 {
                return lost(tx);
            }
            // Counted handled by its done row (see `schema::COUNTERS_SUM`).
            bump(tx, Counter::InProgress, -1)?;
            Ok(())
        })
    }

    fn abandon(&self, claim: &Claim, options: &JournalOptions) -> Result<()> {
        if let Some(unwritten) = &claim.unwritten {
            // Stored abandoned (unfinished: recovery fetches it), unless stored meanwhile.
            return self.transaction(options, true, false, |tx| {
                still_numbered(tx, &self.label, claim, unwritten, "abandon")?;
                write_unwritten(tx, &self.label, claim, unwritten, None, options).map(drop)
            });
        }
        let lost = self.transaction(options, true, false, |tx| {
            let sql = "UPDATE sp_journal_delivery SET state = 'abandoned', token = NULL, updated_ms = ?3, lease_until_ms = 0 WHERE key = ?1 AND state = 'claimed' AND token = ?2";
            if tx.prepare_cached(sql)?.execute(params![claim.key, &claim.token[..], now_ms()])? == 1 {
                bump(tx, Counter::InProgress, -1)?;
                return Ok(None);
            }
            lost_state(tx, claim).map(Some)
        })?;
        match lost {
            None => Ok(()),
            Some(now) => Err(claims::lost_error(claim, "abandon", now)),
        }
    }

    fn record_refused(
        &self,
        index: i64,
        name: Option<&str>,
        transaction_id: Option<i64>,
        options: &JournalOptions,
    ) -> Result<()> {
        self.transaction(options, true, false, |tx| {
            let key = format!("refused:{index}");
            record_index(tx, &self.label, index, Some(&key), name, options)?;
            let sql = "INSERT INTO sp_journal_refused (idx, name, transaction_id, at_ms) VALUES (?1, ?2, ?3, ?4)";
            tx.prepare_cached(sql)?.execute(params![index, name, transaction_id, now_ms()])?;
            bump(tx, Counter::Refused, 1)?;
            Ok(())
        })
    }

    fn admin(&self, access: Access, work: AdminWork<'_>, options: &JournalOptions) -> Result<()> {
        // A read runs in a read transaction when every row is folded (in its snapshot), else, as
        // every other access, in a write transaction that folds first: the figures count every
        // delivery. A renumbering needs nothing more: the write lock already waits for every
        // finish.
        if access == Access::Read {
            let ran = self.transaction(options, false, false, |tx| {
                if unfolded(tx)? {
                    return Ok(false);
                }
                work(&mut SqliteSql { tx, label: &self.label })?;
                Ok(true)
            })?;
            if ran {
                return Ok(());
            }
        }
        self.transaction(options, true, access != Access::Read, |tx| {
            fold(tx, &self.label, options)?;
            work(&mut SqliteSql { tx, label: &self.label })?;
            Ok(settle_folded_id(tx)?)
        })
    }

    fn counters(&self, options: &JournalOptions) -> Result<[i64; 5]> {
        self.transaction(options, false, false, |tx| {
            Ok(tx
                .prepare_cached(schema::COUNTERS_SUM_SQLITE)?
                .query_row([], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?]))?)
        })
    }

    fn size_bytes(&self, _options: &JournalOptions) -> Result<Option<u64>> {
        let len = |path: &std::path::Path| std::fs::metadata(path).map(|m| m.len()).ok();
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        Ok(len(&self.path).map(|db| db + len(std::path::Path::new(&wal)).unwrap_or(0)))
    }

    fn reclaim_step(&self, options: &JournalOptions) -> Result<(u64, bool)> {
        /// Pages per step: 4 MiB of 4 KiB pages, a few milliseconds of writing.
        const STEP_PAGES: i64 = 1024;
        self.transaction(options, true, false, |tx| {
            let pragma = |name: &str| tx.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0));
            // 2: incremental. A journal created before this release has none (0): SQLite
            // reuses its free pages for new rows instead.
            if pragma("auto_vacuum")? != 2 {
                return Ok((0, false));
            }
            let (free, page_size) = (pragma("freelist_count")?, pragma("page_size")?);
            if free == 0 {
                return Ok((0, false));
            }
            tx.execute_batch(&format!("PRAGMA incremental_vacuum({STEP_PAGES})"))?;
            let left = pragma("freelist_count")?;
            Ok((u64::try_from((free - left).max(0) * page_size).unwrap_or(0), left > 0))
        })
    }

    fn lookup(&self, transaction_id: i64, options: &JournalOptions) -> Result<Vec<Record>> {
        self.transaction(options, false, false, |tx| {
            // By the keys it can have (`key::transaction_keys`): no index of `transaction_id`.
            let sql = "SELECT key, name, transaction_id, first_index, state, attempts, created_ms, updated_ms, lease_until_ms, finished_ms, reply, lease_boot FROM sp_journal_delivery WHERE key IN (?1, ?2) AND transaction_id = ?3 ORDER BY id";
            let clock = lease_clock(&self.label)?;
            let [refund, payout] = super::key::transaction_keys(transaction_id);
            let rows: Vec<(Record, String, Option<String>)> = tx
                .prepare_cached(sql)?
                .query_map(params![refund, payout, transaction_id], |r| {
                    Ok((
                        Record {
                            key: r.get(0)?,
                            name: r.get(1)?,
                            transaction_id: r.get(2)?,
                            index: r.get(3)?,
                            state: RecordState::Claimed,
                            attempts: r.get(5)?,
                            created_ms: r.get(6)?,
                            updated_ms: r.get(7)?,
                            lease_until_ms: r.get(8)?,
                            finished_ms: r.get(9)?,
                            reply: r.get(10)?,
                        },
                        r.get(4)?,
                        r.get(11)?,
                    ))
                })?
                .collect::<rusqlite::Result<_>>()?;
            let mut records = Vec::with_capacity(rows.len());
            for (mut record, state_text, lease_boot) in rows {
                record.state = state(state_text)?;
                // Kept on the lease clock, shown on the wall clock.
                record.lease_until_ms = match record.state {
                    RecordState::Claimed => record.lease_until_ms.map(|until| clock.wall_of(until, lease_boot.as_deref())),
                    _ => None,
                };
                records.push(record);
            }
            let sql = "SELECT idx, name, transaction_id, at_ms FROM sp_journal_refused WHERE transaction_id = ?1 ORDER BY id";
            let mut statement = tx.prepare_cached(sql)?;
            let refused = statement.query_map([transaction_id], |r| {
                let index: i64 = r.get(0)?;
                let at: i64 = r.get(3)?;
                Ok(Record {
                    key: format!("refused:{index}"),
                    name: r.get(1)?,
                    index: Some(index),
                    transaction_id: r.get(2)?,
                    state: RecordState::Refused,
                    attempts: 0,
                    created_ms: at,
                    updated_ms: at,
                    lease_until_ms: None,
                    finished_ms: None,
                    reply: None,
                })
            })?;
            for record in refused {
                records.push(record?);
            }
            Ok(records)
        })
    }

    /// On a pooled connection (the caller holds the fork pass for the whole copy, so no fork
    /// copies its snapshot's locks), dropped afterwards if SQLite failed on it.
    fn backup(&self, dest: &std::path::Path, options: &JournalOptions) -> Result<super::BackupReport> {
        let started = std::time::Instant::now();
        let (target, _) = super::new_file::NewFile::create(dest, "dest", "backup")?;
        let mut conn = self.connection(options, false)?;
        let copied = super::backup::copy(&mut conn.db, &self.label, target.temp(), options.lock_timeout);
        if copied.is_err() {
            conn.mark_broken();
        }
        drop(conn);
        let pages = copied?;
        let bytes = target.place()?;
        Ok(super::BackupReport { pages, bytes, elapsed: started.elapsed() })
    }
}

/// The state and attempt count of a claim's key, read after the claim was found not held.
fn lost_state(tx: &Connection, claim: &Claim) -> TxResult<Option<(RecordState, i64)>> {
    let row: Option<(String, i64)> =
        tx.prepare_cached(STATE_SELECT)?.query_row([&claim.key], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    match row {
        Some((text, attempts)) => Ok(Some((state(text)?, attempts))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transaction committed keeps its writes; one dropped without a commit, or whose commit
    /// failed, is rolled back and leaves the connection outside any transaction; one its work
    /// ended (a staged statement's `COMMIT`) is left as the work left it.
    #[test]
    fn began_commits_or_rolls_back_as_rusqlite_did() {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY); CREATE TABLE c (n INTEGER REFERENCES t DEFERRABLE INITIALLY DEFERRED); PRAGMA foreign_keys = ON").unwrap();
        let count =
            |table: &str| db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get::<_, i64>(0)).unwrap();
        for write in [true, false] {
            let tx = Began::begin(&db, write).unwrap();
            assert!(!db.is_autocommit());
            tx.db.execute("INSERT INTO t VALUES (NULL)", []).unwrap();
            tx.commit().unwrap();
            assert!(db.is_autocommit());
        }
        assert_eq!(count("t"), 2);
        {
            let tx = Began::begin(&db, true).unwrap();
            tx.db.execute("INSERT INTO t VALUES (NULL)", []).unwrap();
        }
        assert!(db.is_autocommit());
        assert_eq!(count("t"), 2);
        // A commit refused (a deferred foreign key broken): rolled back when dropped.
        let tx = Began::begin(&db, true).unwrap();
        tx.db.execute("INSERT INTO t VALUES (NULL)", []).unwrap();
        tx.db.execute("INSERT INTO c VALUES (99)", []).unwrap();
        assert!(tx.commit().is_err());
        assert!(db.is_autocommit());
        assert_eq!((count("t"), count("c")), (2, 0));
        // Ended by its work: nothing more to undo, and the next one begins.
        let tx = Began::begin(&db, true).unwrap();
        tx.db.execute_batch("INSERT INTO t VALUES (NULL); COMMIT").unwrap();
        drop(tx);
        assert_eq!(count("t"), 3);
        Began::begin(&db, true).unwrap().commit().unwrap();
        // Begun twice on one connection: refused, the first left as it was.
        let tx = Began::begin(&db, false).unwrap();
        assert!(Began::begin(&db, true).is_err());
        tx.commit().unwrap();
    }

    /// Every read of the deliveries at an index (the fold's check for a reused index,
    /// the operator's reads) finds its rows through an index of the table, never by reading it
    /// whole: the index of `first_index` holds folded rows only (version 6), so that a read
    /// without `folded = 1` would.
    #[test]
    fn reads_by_index_never_scan_the_deliveries() {
        let mut db = Connection::open_in_memory().unwrap();
        let tx = db.transaction().unwrap();
        tx.execute_batch(schema::SQLITE).unwrap();
        add_later_versions(&tx).unwrap();
        let reads = [REUSED_BY].iter().chain(admin::BY_INDEX);
        for statement in reads {
            let mut explain = tx.prepare(&format!("EXPLAIN QUERY PLAN {statement}")).unwrap();
            // Unbound parameters are NULL: the plan does not depend on them.
            let mut rows = explain.raw_query();
            let mut plan: Vec<String> = Vec::new();
            while let Some(row) = rows.next().unwrap() {
                plan.push(row.get(3).unwrap());
            }
            let scans = |d: &&String| d.starts_with("SCAN sp_journal_delivery") || d.starts_with("SCAN d");
            assert!(!plan.iter().any(|d| scans(&d)), "{statement}: {plan:?}");
            assert!(plan.iter().any(|d| d.contains("sp_journal_delivery_index_folded")), "{statement}: {plan:?}");
        }
    }
}
