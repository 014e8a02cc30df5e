//! The PostgreSQL journal, for workers on several hosts: the same semantics as SQLite's on a
//! server, through a blocking client over tokio-postgres (`client`); connections pooled per
//! process and URL.
//!
//! Every call is one READ COMMITTED transaction. A claim is `INSERT ... ON CONFLICT DO NOTHING`;
//! when the key exists, a finished row of the same content answers at once (it never changes
//! again), else `SELECT ... FOR UPDATE` of the existing row decides. Times (leases) are the
//! server's clock, so that hosts whose clocks differ agree. Claims commit with
//! `synchronous_commit=off`, stored replies with `on` (`Synchronous::Full`): the statement that
//! stores a reply sets its own transaction's `synchronous_commit` (`set_config(..., true)`).
//!
//! Nothing the journal relies on is left on a connection between transactions, so that it works
//! unchanged behind a pooler in transaction mode (PgBouncer), where each transaction may run on
//! another server connection, shared with other clients: its statements are unnamed (see
//! `client`; the URL's `statement_cache_size` keeps them prepared on a direct connection
//! instead, see `statement_cache`), every transaction's `BEGIN` sets the settings it relies on
//! for that transaction only (`begin_batch`: `lock_timeout`, `synchronous_commit`, `SET LOCAL`),
//! whatever a staged statement or another client left in the session, and its locks are
//! transaction-level (`pg_advisory_xact_lock`, row locks). A transaction's `BEGIN` is written
//! with its first statement (`Client::defer`), and a transaction of one statement
//! (`Mode::Single`) is written whole, `BEGIN`, the statement and `COMMIT`
//! (`Client::close_with`): one round trip. The finish of a claim at finish writes the partner's
//! staged statements and the storing statement together (`Client::pipeline`): its transaction
//! is one round trip, however many statements it holds: its `COMMIT` is written behind the
//! storing statement, which fails where it stores nothing (`FINISH_UNWRITTEN`), so that the
//! server rolls the transaction back itself. Indexes are
//! appended to `sp_journal_seen` and
//! merged into the runs in batches (every few hundred deliveries of a process, and before
//! `status` and `missing` answer), so that concurrent deliveries never queue on the runs.
//! Counters are spread over shard rows for the same reason.
//!
//! A kept connection the server dropped (a restart, `pg_terminate_backend`, a crash) is found
//! dead at its next statement: it is replaced, with every connection kept from before, and the
//! transaction run once more on a fresh one where that is safe (see `Mode`). Where the first
//! run's outcome is unknown (the connection died after a statement was sent), the second
//! recognises what the first did: its claim by the claim's token, its stored reply or release
//! by the claim's attempt.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Config, Row};

use crate::error::{Error, ErrorKind, Result};

use super::admin::{self, ConflictSeen, JumpKind};
use super::claims::{self, Claim, Decision, Existing, RecordState, Unwritten};
use super::gaps::{self, Run, Runs};
use super::key::{self, Delivery};
use super::pool::{Pool, Pooled, Registry};
use super::schema::{self, Counter};
use super::settled::{self, Settled};
use super::sql::{LeaseClock, Sql, SqlRow, Value, dollar_params};
use super::staged::Staged;
use super::{Access, AdminWork, Begin, Found, JournalOptions, Prepare, Record, Step, Synchronous};

mod client;
mod param;
mod staged;
mod statement_cache;
mod tls;
mod url;

use client::{Client, ConnectError, Deadlines, PipelineError, Typed};
use param::{Param, Params, typed};
use statement_cache::StatementCache;

/// What an error says where a commit was sent and never confirmed (`OUTCOME_UNKNOWN`).
macro_rules! outcome_unknown {
    () => {
        "the change may or may not have been made"
    };
}
const OUTCOME_UNKNOWN: &str = outcome_unknown!();

/// Journals by URL, kept for the life of the process.
static REGISTRY: Registry<String, Postgres> = Registry::new();

/// Creates the tables inside a savepoint: `false` (rolled back to it) when another process
/// created them meanwhile.
fn create_schema(tx: &mut Tx<'_>) -> TxResult<bool> {
    tx.client.batch_execute("SAVEPOINT sp_journal_schema")?;
    match tx.client.batch_execute(&format!("{}{}{}", schema::POSTGRES, schema::POSTGRES_V2, schema::POSTGRES_V3)) {
        Ok(()) => {
            tx.client.batch_execute("RELEASE SAVEPOINT sp_journal_schema")?;
            Ok(true)
        }
        Err(e) if matches!(e.code(), Some(c) if *c == SqlState::DUPLICATE_TABLE || *c == SqlState::UNIQUE_VIOLATION || *c == SqlState::DUPLICATE_OBJECT) =>
        {
            tx.client.batch_execute("ROLLBACK TO SAVEPOINT sp_journal_schema")?;
            Ok(false)
        }
        Err(e) => Err(Fail::Db(e)),
    }
}

/// Whether the function `STORE_UNWRITTEN_FUNCTION` makes is there, in the journal's
/// `search_path`, as an expression.
macro_rules! store_function_exists {
    () => {
        "to_regprocedure('sp_journal_store_unwritten(text, text, bigint, bigint, text, bytea, bytea, text, bigint, bigint)') IS NOT NULL"
    };
}

/// The server's clock in milliseconds since the Unix epoch.
macro_rules! now_ms {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}

/// The CTE `seen` recording the index `$4` (when not NULL) as seen, when the CTE named `$when`
/// returned a row.
macro_rules! seen_when {
    ($when:literal) => {
        concat!(
            "seen AS (INSERT INTO sp_journal_seen (idx, at_ms) SELECT $4::bigint, ",
            now_ms!(),
            " WHERE $4::bigint IS NOT NULL AND EXISTS (SELECT 1 FROM ",
            $when,
            ") ON CONFLICT DO NOTHING)"
        )
    };
}

/// Indexes merged into the runs per statement batch.
const FOLD_BATCH: i64 = 4096;
/// A process merges the seen indexes after this many indexed deliveries.
const FOLD_EVERY: u64 = 256;
/// Any key, the same in every process: serialises the creation of the tables.
const SCHEMA_LOCK: i64 = 0x7370_6a6f_7572_6e6c;
/// The transaction-level advisory lock a renumbering takes exclusively (`Access::Renumber`) and
/// every write of a claim at finish shared (`Mode::AtFinish`): `spjnumbr` in ASCII.
macro_rules! numbering_lock {
    () => {
        8318265534402355826
    };
}
const NUMBERING_LOCK: i64 = numbering_lock!();

pub(crate) struct Postgres {
    config: Config,
    /// `postgres://user@host:port/dbname`, without the password, for messages.
    label: String,
    /// The URL's `sslmode` and `sslrootcert`, and the TLS connector they make.
    tls: tls::Tls,
    /// The URL's `command_timeout`, which wins over `JournalOptions::command_timeout`.
    command_timeout: Option<Duration>,
    /// The URL's `statement_cache_size`: how many of the journal's statements a connection
    /// keeps prepared by name (0: none, every statement unnamed; see `statement_cache`).
    statement_cache_size: usize,
    pool: Pool<PgConn>,
    /// Indexed deliveries of this process, for `maybe_fold`.
    calls: AtomicU64,
    /// See `Store::numbering_hint`.
    numbering_hint: std::sync::atomic::AtomicI64,
    /// Spreads this process's counter updates over the shards.
    next_shard: AtomicU64,
    /// Raised past a connection's `generation` when that connection is found dead (the server
    /// restarted, crashed or dropped it): the kept connections opened before it are dead as
    /// likely, and are dropped unused rather than each failing a call.
    generation: AtomicU64,
    /// What an open found: an open with `claim_at_finish` skips the check a process made
    /// already, a statement and a round trip in a process that opens the journal for every
    /// request (PHP-FPM); its every `begin` reads the schema version with the key (`HOLDS`).
    settled: Settled,
}

struct PgConn {
    client: Client,
    /// The journal's statements it keeps prepared, when the URL asks.
    statements: StatementCache,
    /// `Postgres::generation` when it was opened.
    generation: u64,
    /// Whether `PREPARE_GUARD` ran on it: only where the URL keeps statements prepared (a
    /// direct connection), at its first claim at finish.
    guard_prepared: bool,
}

enum Fail {
    Db(tokio_postgres::Error),
    Journal(Error),
}

impl From<tokio_postgres::Error> for Fail {
    fn from(e: tokio_postgres::Error) -> Self {
        Fail::Db(e)
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Journal(e)
    }
}

type TxResult<T> = std::result::Result<T, Fail>;

/// How `Postgres::transaction` runs its work, and whether it may run it again when the
/// connection dies where the work's outcome is unknown: during a `Single` statement, or at
/// `COMMIT` (the server may have committed and died before answering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One statement in a transaction of its own (`synchronous_commit=off` unless it sets its
    /// own), written with its `BEGIN` and `COMMIT` in one round trip. Run again on a fresh
    /// connection when the connection dies during it (its outcome unknown, as at `COMMIT`):
    /// every such statement is harmless to run twice or recognises its own first run (a claim
    /// by its token, a stored reply or release by its attempt); at worst a replay or refusal is
    /// counted twice.
    Single,
    /// Between `BEGIN` and `COMMIT`, `synchronous_commit=off`; run again as `Single` is, so
    /// only for work that is too: `begin`'s decision (a claim taken over is recognised by its
    /// token; at worst a replay or conflict is counted twice), merging the seen indexes,
    /// creating the tables, reading.
    Normal,
    /// As `Normal`, for the writes of a claim `begin` wrote nothing for (`Claim::unwritten`):
    /// in the `BEGIN` batch (sent with the first statement, as every `BEGIN` is), the
    /// numbering's lock taken shared (so that a renumbering waits for the transaction, and a
    /// statement after it sees the numbering a renumbering committed) and the transaction's
    /// guard set (`slotpartner.guard`, a transaction-local setting; see `FINISH_UNWRITTEN`).
    AtFinish,
    /// As `Normal`, for work that must not be done twice (an operator's resolution, a
    /// renumbering): run again only when the connection died before `COMMIT` was sent.
    Once,
}

/// One transaction on a pooled connection. Its statements are sent unnamed, each parameter
/// declared as the type of its value (`param`), or by name when the connection keeps them
/// prepared (`statement_cache`).
struct Tx<'a> {
    client: &'a mut Client,
    statements: &'a mut StatementCache,
}

impl Tx<'_> {
    /// `sql`'s statement when the connection keeps it prepared (see `StatementCache::prepared`).
    fn prepared(
        &mut self,
        sql: &str,
        params: &Typed<'_>,
    ) -> std::result::Result<Option<tokio_postgres::Statement>, tokio_postgres::Error> {
        self.statements.prepared(self.client, sql, params)
    }

    fn execute(&mut self, sql: &str, params: Params<'_>) -> std::result::Result<u64, tokio_postgres::Error> {
        let params = typed(params);
        let named = self.prepared(sql, &params)?;
        self.client.execute(statement_cache::sql(sql, named.as_ref()), &params)
    }

    fn query(&mut self, sql: &str, params: Params<'_>) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
        let params = typed(params);
        let named = self.prepared(sql, &params)?;
        self.client.query(statement_cache::sql(sql, named.as_ref()), &params)
    }

    fn query_one(&mut self, sql: &str, params: Params<'_>) -> std::result::Result<Row, tokio_postgres::Error> {
        let params = typed(params);
        let named = self.prepared(sql, &params)?;
        self.client.query_one(statement_cache::sql(sql, named.as_ref()), &params)
    }

    fn query_opt(&mut self, sql: &str, params: Params<'_>) -> std::result::Result<Option<Row>, tokio_postgres::Error> {
        let params = typed(params);
        let named = self.prepared(sql, &params)?;
        self.client.query_opt(statement_cache::sql(sql, named.as_ref()), &params)
    }

    fn meta(&mut self, key: &str) -> std::result::Result<Option<i64>, tokio_postgres::Error> {
        match self.query_opt("SELECT value FROM sp_journal_meta WHERE key = $1", &[&key])? {
            Some(row) => row.try_get(0).map(Some),
            None => Ok(None),
        }
    }

    fn bump(&mut self, shard: i64, counter: Counter, by: i64) -> std::result::Result<(), tokio_postgres::Error> {
        self.execute(counter.postgres_update(), &[&shard, &by]).map(drop)
    }
}

impl Postgres {
    pub fn open(url: &str, options: &JournalOptions, prepare: Prepare) -> Result<(Arc<Postgres>, Found)> {
        let store = REGISTRY.get_or_make(url.to_owned(), || {
            // `sslmode` and `sslrootcert` first: the `postgres` parser refuses libpq's
            // `verify-ca`, `verify-full` and `sslrootcert`.
            let own = url::take_ours(url)?;
            let tls = tls::from_params(own.sslmode.as_deref(), own.sslrootcert.as_deref())?;
            let mut config: Config = own.rest.parse().map_err(|e| {
                Error::field(ErrorKind::InvalidArgument, "journal_url", format!("not a PostgreSQL URL: {e}"))
            })?;
            tls.configure(&mut config);
            if config.get_application_name().is_none() {
                config.application_name("slotpartner");
            }
            let label = label(&config);
            let pid = u64::from(std::process::id());
            Ok(Postgres {
                config,
                label,
                tls,
                command_timeout: own.command_timeout,
                statement_cache_size: own.statement_cache_size,
                pool: Pool::new(8),
                calls: AtomicU64::new(pid),
                numbering_hint: std::sync::atomic::AtomicI64::new(0),
                next_shard: AtomicU64::new(pid),
                generation: AtomicU64::new(0),
                settled: Settled::default(),
            })
        })?;
        let found = store.prepare(options, prepare)?;
        Ok((store, found))
    }

    /// Creates the tables if absent, checks the schema version (migrating an older one), stores
    /// a configured first index; with `Prepare::Existing`, reports a missing journal or an older
    /// version instead of creating or migrating it (reading only, in a transaction of its own).
    /// Processes opening a new database at once serialise on an advisory lock; one that still
    /// finds the tables created under it (its catalog view predates the other's commit) rolls
    /// its attempt back and looks again.
    fn prepare(&self, options: &JournalOptions, prepare: Prepare) -> Result<Found> {
        if self.settled.skips(options, prepare) {
            return Ok(Found::Current);
        }
        let found = self.prepare_once(options, prepare)?;
        self.settled.note(options, prepare, &found);
        Ok(found)
    }

    fn prepare_once(&self, options: &JournalOptions, prepare: Prepare) -> Result<Found> {
        let create = prepare == Prepare::CreateOrMigrate;
        if create && self.settled(options)? {
            return Ok(Found::Current);
        }
        for attempt in 1.. {
            let settled = self.transaction(options, Mode::Normal, |tx| {
                let exists = |tx: &mut Tx<'_>| -> TxResult<bool> {
                    let row = tx.query_opt("SELECT to_regclass('sp_journal_meta') IS NOT NULL", &[])?;
                    Ok(row.map(|r| r.try_get(0)).transpose()?.unwrap_or(false))
                };
                if !exists(tx)? {
                    if !create {
                        return Ok(Some(Found::Absent(format!(
                            "{}: no sp_journal_meta in the database (or its search_path)",
                            self.label
                        ))));
                    }
                    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
                    if !exists(tx)? && !create_schema(tx)? {
                        return Ok(None);
                    }
                }
                if let Some(older) = schema::check_version(&self.label, tx.meta("schema_version")?)? {
                    if !create {
                        return Ok(Some(Found::Older(older)));
                    }
                    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
                    if let Some(from) = schema::check_version(&self.label, tx.meta("schema_version")?)? {
                        tx.client.batch_execute(schema::POSTGRES_V2)?;
                        tx.client.batch_execute(schema::POSTGRES_V3)?;
                        tx.client.batch_execute(schema::POSTGRES_V4)?;
                        tx.client.batch_execute(schema::POSTGRES_V5)?;
                        tx.client.batch_execute(schema::POSTGRES_V6)?;
                        tx.client.batch_execute(STORE_UNWRITTEN_FUNCTION)?;
                        admin::migrate(&mut PgSql { tx, label: &self.label }, from)?;
                    }
                }
                // A journal restored from a dump of its tables (`backup::POSTGRES_HINT`) comes
                // without its function: made again.
                if create && !store_function_exists(tx)? {
                    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
                    if !store_function_exists(tx)? {
                        tx.client.batch_execute(STORE_UNWRITTEN_FUNCTION)?;
                    }
                }
                if let Some(first) = options.first_index {
                    if tx.meta("numbering")?.unwrap_or(1) == 1 && tx.meta("first_index")? != Some(first) {
                        tx.execute(
                            "INSERT INTO sp_journal_meta (key, value) VALUES ('first_index', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            &[&first],
                        )?;
                    }
                }
                Ok(Some(Found::Current))
            })?;
            match settled {
                Some(found) => return Ok(found),
                None if attempt >= 5 => break,
                None => {}
            }
        }
        Ok(Found::Current)
    }

    /// Whether the journal is current and holds the configured first index, read in one
    /// statement (`Mode::Single`: one round trip): the usual case of an open, a
    /// journal opened again (PHP-FPM opens one for every request), costs a round trip instead
    /// of a transaction of four. `false` sends the open down the full path, which decides.
    fn settled(&self, options: &JournalOptions) -> Result<bool> {
        const SETTLED: &str = concat!(
            "SELECT (SELECT value FROM sp_journal_meta WHERE key = 'schema_version'), ",
            "(SELECT value FROM sp_journal_meta WHERE key = 'numbering'), ",
            "(SELECT value FROM sp_journal_meta WHERE key = 'first_index'), ",
            store_function_exists!()
        );
        self.transaction(options, Mode::Single, |tx| {
            let row = match tx.query_one(SETTLED, &[]) {
                Ok(row) => row,
                Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => return Ok(false),
                Err(e) => return Err(Fail::Db(e)),
            };
            let (version, numbering, first, function): (Option<i64>, Option<i64>, Option<i64>, bool) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, row.try_get(3)?);
            let first_stored = match options.first_index {
                None => true,
                Some(wanted) => numbering.unwrap_or(1) != 1 || first == Some(wanted),
            };
            Ok(version == Some(schema::VERSION) && first_stored && function)
        })
    }

    /// How long a connection waits: to connect (the URL's `connect_timeout`, else
    /// `lock_timeout` and at least a second), and a round trip (`command_timeout`).
    fn deadlines(&self, options: &JournalOptions) -> Deadlines {
        Deadlines {
            connect: self
                .config
                .get_connect_timeout()
                .copied()
                .unwrap_or(options.lock_timeout.max(Duration::from_secs(1))),
            command: self.command_timeout.unwrap_or_else(|| options.command_timeout()),
        }
    }

    fn connect(&self, options: &JournalOptions) -> Result<PgConn> {
        let generation = self.generation.load(Ordering::Acquire);
        let deadlines = self.deadlines(options);
        let mut config = self.config.clone();
        config.connect_timeout(deadlines.connect);
        let client = Client::connect(&config, self.tls.connector(), deadlines).map_err(|e| match e {
            ConnectError::Runtime(e) => {
                Error::new(ErrorKind::Journal, format!("{}: cannot start the client's I/O: {e}", self.label))
            }
            ConnectError::TimedOut(after) => Error::new(
                ErrorKind::Journal,
                format!(
                    "{}: not connected within connect_timeout ({} s): the server did not complete the connection (TCP, TLS, authentication and start-up); is it running, or stalled?",
                    self.label,
                    seconds(after)
                ),
            ),
            ConnectError::Db(e) => {
                let mut error = self.error(&e);
                if let Some(why) = self.tls.explain(&e) {
                    error.message = format!("{}: {why}", error.message);
                }
                error
            }
        })?;
        Ok(PgConn {
            client,
            statements: StatementCache::new(self.statement_cache_size),
            generation,
            guard_prepared: false,
        })
    }

    /// A connection for one transaction: a kept one, unless it is closed or was opened before a
    /// connection was last found dead (they died together: a restart), else a new one.
    fn connection(&self, options: &JournalOptions) -> Result<Pooled<'_, PgConn>> {
        let mut looks = 0;
        loop {
            looks += 1;
            let mut conn = self.pool.get(|| self.connect(options))?;
            let stale = conn.generation < self.generation.load(Ordering::Acquire);
            // Bounded: the pool keeps a few, and a new connection is of the current generation.
            if !(stale || conn.client.is_closed()) || looks > 32 {
                return Ok(conn);
            }
            conn.mark_broken();
        }
    }

    /// Drops `conn`, found dead, and every kept connection opened before it.
    fn dead(&self, conn: &mut Pooled<'_, PgConn>) {
        conn.mark_broken();
        self.generation.fetch_max(conn.generation + 1, Ordering::AcqRel);
    }

    /// The error of a round trip on `client` past its deadline: the connection was closed, and
    /// `at_commit` (the round trip carried a commit, or a statement in autocommit) says that the
    /// outcome is unknown.
    fn timed_out(&self, client: &Client, at_commit: bool) -> Error {
        let outcome = if at_commit {
            concat!("the commit was sent and not confirmed: ", outcome_unknown!())
        } else {
            "nothing of the transaction was committed"
        };
        Error::new(
            ErrorKind::Journal,
            format!(
                "{}: no answer from the server within command_timeout ({} s): the connection was closed; {outcome}",
                self.label,
                seconds(client.command_timeout())
            ),
        )
    }

    fn error(&self, e: &tokio_postgres::Error) -> Error {
        let mut message = format!("{}: {e}", self.label);
        if let Some(db) = e.as_db_error() {
            message = format!("{message}: {} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                message = format!("{message} ({detail})");
            }
        } else if message.contains("error connecting") {
            // The client's text leaves out why: the resolver's or the system's words.
            if let Some(why) = std::error::Error::source(e) {
                message = format!("{message}: {why}");
            }
            message.push_str(if unresolved_host(e) {
                " (the host name does not resolve: check the host in the journal URL)"
            } else {
                " (is the PostgreSQL server running and reachable?)"
            });
        } else if e.is_closed() {
            message.push_str(" (is the PostgreSQL server running and reachable?)");
        }
        Error::new(ErrorKind::Journal, message)
    }

    /// A counter shard for this call: spread over processes and calls.
    fn shard(&self) -> i64 {
        i64::try_from(self.next_shard.fetch_add(1, Ordering::Relaxed) % schema::PG_SHARDS.unsigned_abs()).unwrap_or(0)
    }

    /// Runs `work` as one transaction: `Mode::Single` for one statement in autocommit (no
    /// `BEGIN`), else between `BEGIN` and `COMMIT`. Retried on a serialization failure or a
    /// deadlock, and once on a fresh connection when the connection turns out dead (the server
    /// restarted, crashed or dropped it: see `Mode` for when that is done).
    fn transaction<T>(
        &self,
        options: &JournalOptions,
        mode: Mode,
        work: impl FnMut(&mut Tx<'_>) -> TxResult<T>,
    ) -> Result<T> {
        self.transaction_retried(options, mode, work).map(|(value, _)| value)
    }

    /// `transaction`, telling also whether the work was run again after its connection died
    /// with its outcome unknown: then its first run may have changed what the second finds, and
    /// a failure of the second says that the change may or may not have been made (whatever
    /// the second got to, the first run's commit was never confirmed).
    fn transaction_retried<T>(
        &self,
        options: &JournalOptions,
        mode: Mode,
        work: impl FnMut(&mut Tx<'_>) -> TxResult<T>,
    ) -> Result<(T, bool)> {
        let mut unknown = false;
        match self.transaction_runs(options, mode, work, &mut unknown) {
            Ok(value) => Ok((value, unknown)),
            Err(mut error) if unknown && error.kind == ErrorKind::Journal => {
                if !error.message.contains(OUTCOME_UNKNOWN) {
                    error.message.push_str(
                        "; an earlier run's commit was sent and its connection lost before the server confirmed it: ",
                    );
                    error.message.push_str(OUTCOME_UNKNOWN);
                }
                Err(error)
            }
            Err(error) => Err(error),
        }
    }

    /// The runs of `transaction_retried`; `unknown` set when one ended with its outcome unknown
    /// and the work ran again.
    fn transaction_runs<T>(
        &self,
        options: &JournalOptions,
        mode: Mode,
        mut work: impl FnMut(&mut Tx<'_>) -> TxResult<T>,
        unknown: &mut bool,
    ) -> Result<T> {
        let (mut tries, mut reconnected) = (0, false);
        loop {
            tries += 1;
            let mut conn = self.connection(options)?;
            if let Err(e) = self.begin(&mut conn, options, mode) {
                conn.mark_broken();
                if conn.client.timed_out() {
                    return Err(self.timed_out(&conn.client, *unknown));
                }
                if connection_lost(&e) && !reconnected {
                    // Nothing of the work was sent: run it on a fresh connection.
                    self.dead(&mut conn);
                    reconnected = true;
                    continue;
                }
                return Err(self.error(&e));
            }
            let result = {
                let PgConn { client, statements, .. } = &mut *conn;
                work(&mut Tx { client, statements })
            };
            // Whether a failure leaves the outcome unknown: it came at a single statement (sent
            // with its COMMIT) or at COMMIT. A failure inside BEGIN ... COMMIT committed nothing.
            let (result, at_commit) = match (result, mode) {
                (result, Mode::Single) => (end_single(&mut conn, result), true),
                // The work's last request carried the `COMMIT` (`Postgres::finish_unwritten`).
                (result, _) if conn.client.take_closed() => (result, true),
                (Ok(value), _) => (conn.client.batch_execute("COMMIT").map(|()| value).map_err(Fail::Db), true),
                (Err(fail), _) => {
                    if conn.client.batch_execute("ROLLBACK").is_err() {
                        conn.mark_broken();
                    }
                    (Err(fail), false)
                }
            };
            if conn.client.timed_out() {
                // Past its deadline: the connection is closed, the work is not run again (the
                // server may still be stalled), and the caller answers as for a lost commit.
                conn.mark_broken();
                return Err(self.timed_out(&conn.client, at_commit || *unknown));
            }
            match result {
                Ok(value) => return Ok(value),
                Err(Fail::Journal(e)) => return Err(e),
                Err(Fail::Db(e)) => {
                    if conn.client.is_closed() {
                        conn.mark_broken();
                    }
                    if connection_lost(&e) {
                        self.dead(&mut conn);
                        let repeatable = !(at_commit && mode == Mode::Once);
                        if !reconnected && repeatable {
                            reconnected = true;
                            *unknown |= at_commit;
                            continue;
                        }
                        let mut error = self.error(&e);
                        if at_commit {
                            error
                                .message
                                .push_str("; the connection was lost before the server confirmed the commit: ");
                            error.message.push_str(OUTCOME_UNKNOWN);
                        }
                        return Err(error);
                    }
                    let code = e.code();
                    if poisoned(&e) {
                        // The session is not what the journal set up (a statement of the
                        // partner's changed it, or its prepared statements are stale): a
                        // fresh connection for this work, run again, and for every later call.
                        conn.mark_broken();
                    }
                    if code == Some(&SqlState::FEATURE_NOT_SUPPORTED) {
                        // A plan gone stale with its table ("cached plan must not change result
                        // type") is stale on every connection that kept it: the ones opened
                        // before go too, so that the run again meets none of them.
                        self.generation.fetch_max(conn.generation + 1, Ordering::AcqRel);
                    }
                    let transient = code == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
                        || code == Some(&SqlState::T_R_DEADLOCK_DETECTED)
                        || poisoned(&e);
                    if transient && tries < 4 {
                        continue;
                    }
                    return Err(self.error(&e));
                }
            }
        }
    }

    /// `finish` with staged statements, in one transaction: the session's guard set (a
    /// transaction-local setting), the partner's statements, then the reply stored only while the
    /// guard is still set (so a statement that ended the transaction, which the check at staging
    /// could not see, makes the finish fail instead of storing the reply alone), committed
    /// durably; the statements and the storing one sent together (`Postgres::staged_then_store`). Run again on a fresh connection after a lost connection: the run after a lost one
    /// first confirms the claim is still held (locking it), and runs nothing when the first run
    /// committed. Answers whether the reply was stored, and whether the work ran again.
    fn finish_staged(
        &self,
        claim: &Claim,
        reply: &[u8],
        staged: &[Staged],
        shard: i64,
        commit: &str,
        options: &JournalOptions,
    ) -> Result<(bool, bool)> {
        self.transaction_retried(options, Mode::Normal, |tx| {
            if tx.query_opt(HOLD, &[&claim.key, &&claim.token[..]])?.is_none() {
                return Ok(false);
            }
            let params: Params<'_> = &[&claim.key, &&claim.token[..], &reply, &shard, &commit];
            let row = self.staged_then_store(tx, staged, FINISH_GUARDED, params)?;
            let (count, guard): (i64, Option<String>) = (row.try_get(0)?, row.try_get(1)?);
            if guard.as_deref() != Some("on") {
                return Err(Fail::Journal(super::staged::escaped()));
            }
            Ok(count == 1)
        })
    }

    /// The staged statements, then the storing statement `sql` with `params`, written together
    /// in one round trip (with the transaction's `BEGIN`, when not yet sent): the one row the
    /// storing statement answers.
    fn staged_then_store(&self, tx: &mut Tx<'_>, staged: &[Staged], sql: &str, params: Params<'_>) -> TxResult<Row> {
        let params = typed(params);
        let named = tx.prepared(sql, &params)?;
        self.staged_then(tx, staged, statement_cache::sql(sql, named.as_ref()), &params)
    }

    /// `staged_then_store` of the storing statement as it is sent (`store`), with its typed
    /// parameters.
    fn staged_then(
        &self,
        tx: &mut Tx<'_>,
        staged: &[Staged],
        store: client::Sql<'_>,
        params: &Typed<'_>,
    ) -> TxResult<Row> {
        let rows = staged::run_then(tx.client, tx.statements, staged, (store, params))?;
        <[Row; 1]>::try_from(rows).map(|[row]| row).map_err(|rows| {
            Fail::Journal(Error::new(
                ErrorKind::Journal,
                format!("{}: a storing statement answered {} rows, not one", self.label, rows.len()),
            ))
        })
    }

    /// Begins a transaction of `mode` on `conn`: its `begin_batch` is sent with its first
    /// statement, in its round trip, and a `Mode::Single` transaction's `COMMIT` after it.
    fn begin(
        &self,
        conn: &mut Pooled<'_, PgConn>,
        options: &JournalOptions,
        mode: Mode,
    ) -> std::result::Result<(), tokio_postgres::Error> {
        conn.client.set_command_timeout(self.deadlines(options).command);
        if mode == Mode::AtFinish && self.statement_cache_size > 0 && !conn.guard_prepared {
            // A round trip of its own, once a connection, outside any transaction.
            conn.client.batch_execute(PREPARE_GUARD)?;
            conn.guard_prepared = true;
        }
        let batch = begin_batch(mode, options, conn.guard_prepared);
        conn.client.defer(batch)?;
        if mode == Mode::Single {
            conn.client.close_with("COMMIT");
        }
        Ok(())
    }

    /// Records that `index`, first delivered with `other`, came again with the key `key` (an
    /// index reused), for the operator (see `Journal::index_jumps`).
    fn record_reused(&self, index: i64, key: &str, name: &str, other: &str, options: &JournalOptions) -> Result<()> {
        self.transaction(options, Mode::Normal, |tx| {
            let sql = &mut PgSql { tx, label: &self.label };
            Ok(admin::record_jump(sql, JumpKind::Reused, index, None, Some(key), Some(name), Some(other))?)
        })
    }

    /// `finish` of a claim `begin` wrote nothing for: the staged statements, then the delivery
    /// stored done with the reply and its index, in one transaction
    /// (`FINISH_UNWRITTEN`). A key stored by another delivery meanwhile rolls it all back; so
    /// does a staged statement failing on what that delivery's statements did (the ledger's
    /// unique key). Then: success when that delivery had the same content and stored this very
    /// reply, else `ClaimLost`. A run after a lost connection first looks for its own first
    /// run's row (by the token) and runs nothing when it is there.
    fn finish_unwritten(
        &self,
        claim: &Claim,
        unwritten: &Unwritten,
        reply: &[u8],
        staged: &[Staged],
        commit: &str,
        options: &JournalOptions,
    ) -> Result<()> {
        let mut runs = 0;
        let mut renumbered = false;
        let stored = self.transaction(options, Mode::AtFinish, |tx| {
            runs += 1;
            if runs > 1 {
                // The key a renumbering since gave it, made only for a run again.
                let renamed = format!("{}{}", admin::numbering_prefix(unwritten.numbering), claim.key);
                if tx.query_one(STORED_BY_TOKEN, &[&claim.key, &&claim.token[..], &renamed])?.try_get::<_, bool>(0)? {
                    return Ok(None); // stored by the first run, whose answer was lost with its connection
                }
            }
            let params: Params<'_> = &[
                &claim.key,
                &unwritten.name,
                &claim.transaction_id,
                &claim.index,
                &unwritten.content,
                &&claim.token[..],
                &reply,
                &commit,
                &unwritten.numbering,
                &schema::VERSION,
            ];
            // The statement itself where the connection keeps it (by its name), else the call of
            // the function (unnamed).
            let params = typed(params);
            let kept = tx.prepared(FINISH_UNWRITTEN_KEPT, &params)?;
            let store = statement_cache::sql(FINISH_UNWRITTEN, kept.as_ref());
            // Either fails where it stores nothing (`not_stored!`): the `COMMIT` goes with it,
            // and a success is a delivery stored.
            tx.client.close_with("COMMIT");
            let row = match self.staged_then(tx, staged, store, &params) {
                Err(Fail::Db(e)) => match not_stored(&e) {
                    Some("guard") => return Err(Fail::Journal(super::staged::escaped())),
                    Some("numbering") => {
                        renumbered = true;
                        return Err(Fail::Journal(claims::renumbered_error(claim, "finish", unwritten.numbering)));
                    }
                    // Rolled back; what is stored instead is read below (`STORED_ALIKE`).
                    Some(_) => return Err(Fail::Journal(claims::lost_error(claim, "finish", None))),
                    None => return Err(Fail::Db(e)),
                },
                other => other?,
            };
            Ok(row.try_get::<_, Option<String>>(2)?)
        });
        let reused = match stored {
            Ok(reused) => reused,
            Err(e) if !renumbered && (e.kind == ErrorKind::ClaimLost || super::staged::is_failed(&e)) => {
                // The key stored meanwhile (a staged statement may have failed on what that
                // delivery's statements did): by a delivery of the same content with this
                // very reply, the event is handled once and this reply is its stored reply.
                // Its own index recorded and a replay counted then, all in the numbering it was
                // claimed in (a renumbering since makes it `ClaimLost`, whatever is stored).
                let params: Params<'_> =
                    &[&claim.key, &unwritten.content, &reply, &claim.index, &unwritten.numbering, &self.shard()];
                let (numbered, state, attempts, alike) = self.transaction(options, Mode::AtFinish, |tx| {
                    let row = tx.query_one(STORED_ALIKE, params)?;
                    if let (Some(at), Some(index)) = (row.try_get::<_, Option<i64>>(4)?, claim.index) {
                        // Stored at another index: not this index's event, which stays missing.
                        let sql = &mut PgSql { tx, label: &self.label };
                        admin::record_jump(
                            sql,
                            JumpKind::Moved,
                            index,
                            Some(at),
                            Some(&claim.key),
                            Some(&unwritten.name),
                            None,
                        )?;
                    }
                    let state: Option<&str> = row.try_get(1)?;
                    Ok((
                        row.try_get::<_, bool>(0)?,
                        state.map(RecordState::parse).transpose()?,
                        row.try_get::<_, Option<i64>>(2)?,
                        row.try_get::<_, bool>(3)?,
                    ))
                })?;
                return match (numbered, state, attempts, alike) {
                    (false, ..) => Err(claims::renumbered_error(claim, "finish", unwritten.numbering)),
                    (true, None, ..) => Err(e),
                    (true, Some(_), _, true) => Ok(()),
                    (true, Some(state), attempts, false) => {
                        Err(claims::lost_error(claim, "finish", Some((state, attempts.unwrap_or(claim.attempt)))))
                    }
                };
            }
            Err(e) => return Err(e),
        };
        if let (Some(other), Some(index)) = (reused, claim.index) {
            self.record_reused(index, &claim.key, &unwritten.name, &other, options)?;
        }
        if claim.index.is_some() {
            self.maybe_fold(options);
        }
        Ok(())
    }

    /// Merges seen indexes into the runs now and then; a failure here is left for `status`.
    fn maybe_fold(&self, options: &JournalOptions) {
        if self.calls.fetch_add(1, Ordering::Relaxed) % FOLD_EVERY == 0 {
            let _ = self.transaction(options, Mode::Normal, |tx| fold(tx, &self.label, false, false, options));
        }
    }
}

/// Whether `e` says the connection is gone: the server shut down (SQLSTATE 57P01, a restart or
/// `pg_terminate_backend`), crashed (57P02), is starting (57P03), ended an idle session
/// (57P05), ended it for any other reason (any FATAL error), reported a connection exception
/// (class 08: PgBouncer answers `server conn crashed?`, 08P01, with severity ERROR when its
/// server connection died under the transaction, and closes the client's connection only after
/// it, so that it may come as the whole answer to a `COMMIT` before the connection's end is
/// seen), or the socket failed. A fresh connection may succeed where it failed.
fn connection_lost(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::Severity;
    const GONE: [SqlState; 4] = [
        SqlState::ADMIN_SHUTDOWN,
        SqlState::CRASH_SHUTDOWN,
        SqlState::CANNOT_CONNECT_NOW,
        SqlState::IDLE_SESSION_TIMEOUT,
    ];
    e.is_closed()
        || e.code().is_some_and(|code| GONE.contains(code))
        || e.as_db_error().is_some_and(|db| matches!(db.parsed_severity(), Some(Severity::Fatal | Severity::Panic)))
        || e.code().is_some_and(|code| code.code().starts_with("08"))
        || std::error::Error::source(e).is_some_and(|cause| cause.is::<std::io::Error>())
}

/// Whether `e` says the connection's session is no longer the one the journal relies on: its
/// tables are not found or not allowed (a search path or role changed for the session), or a
/// statement it keeps prepared (`statement_cache_size`) is stale (`cached plan must not change
/// result type` after a table changed, or gone after a `DEALLOCATE`). Such a connection is
/// dropped, not kept.
fn poisoned(e: &tokio_postgres::Error) -> bool {
    const STALE: [SqlState; 4] = [
        SqlState::FEATURE_NOT_SUPPORTED,
        SqlState::INVALID_SQL_STATEMENT_NAME,
        SqlState::UNDEFINED_TABLE,
        SqlState::INSUFFICIENT_PRIVILEGE,
    ];
    e.code().is_some_and(|code| STALE.contains(code))
}

/// Whether connecting failed because the host name did not resolve. The resolver's failure has
/// no `io::ErrorKind` of its own: the standard library words it "failed to lookup address
/// information: ...", and that is what is looked for.
fn unresolved_host(e: &tokio_postgres::Error) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(error) = next {
        if error.to_string().starts_with("failed to lookup address information") {
            return true;
        }
        next = error.source();
    }
    false
}

/// `duration` in seconds for messages: `15`, `2.5`.
fn seconds(duration: Duration) -> String {
    let text = format!("{:.3}", duration.as_secs_f64());
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The batch that begins each of the journal's transactions (written with its first
/// statement): READ COMMITTED whatever the session's default, and every setting the journal
/// relies on, set for this transaction only (`SET LOCAL`), so that none is left on the
/// connection and none found there counts: neither one a staged statement changed for the
/// session (`set_config(..., false)`) nor one another client of a pooler's server connection
/// left. `lock_timeout` is the journal's lock time-out; `synchronous_commit` is off (a
/// statement storing a reply sets its own). A claim at finish's (`Mode::AtFinish`) also takes
/// the numbering's lock shared and sets the transaction's guard, in a statement after the
/// settings, so that the lock waits under the journal's `lock_timeout`.
///
/// The settings are `SET LOCAL`s, not a `SELECT set_config(...)`: a `SET` is not planned, where
/// the batch is sent whole at every transaction (nothing prepared may be left on a connection a
/// pooler shares) and a `SELECT` of the settings was planned every time (15-20 µs; see
/// docs/experiments-2026-12.md, 2026-12-02 10:55 UTC).
///
/// `guard_prepared`: the connection has the claim at finish's statement prepared by
/// `PREPARE_GUARD` (it keeps the journal's statements prepared: a direct connection), and the
/// batch runs it by `EXECUTE`, planned once a connection instead of at every claim at finish
/// (9 µs of the server's time; a statement prepared in the protocol's way instead would be a
/// message more to answer, which costs more: docs/experiments-2026-12.md, 2026-12-03).
fn begin_batch(mode: Mode, options: &JournalOptions, guard_prepared: bool) -> String {
    let lock_ms = options.lock_timeout.as_millis().max(1);
    let settings = format!(
        "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = {lock_ms}; SET LOCAL synchronous_commit = off"
    );
    match mode {
        Mode::AtFinish if guard_prepared => format!("{settings}; EXECUTE sp_journal_guard"),
        Mode::AtFinish => format!("{settings}; SELECT {}", at_finish_guard!()),
        _ => settings,
    }
}

/// What a claim at finish's transaction does after its settings (see `begin_batch`): the
/// numbering's lock taken shared, the transaction's guard set.
macro_rules! at_finish_guard {
    () => {
        concat!("pg_advisory_xact_lock_shared(", numbering_lock!(), "), set_config('slotpartner.guard', 'on', true)")
    };
}
use at_finish_guard;

/// Prepares `at_finish_guard!` on a connection as `sp_journal_guard` (a name of the journal's,
/// as its tables' are), for `begin_batch`. A session that lost it (`DEALLOCATE`) fails its next
/// claim at finish with SQLSTATE 26000, and the connection is replaced (`poisoned`).
const PREPARE_GUARD: &str = concat!("PREPARE sp_journal_guard AS SELECT ", at_finish_guard!());

/// Ends a `Mode::Single` transaction whose `COMMIT` did not go with its statement (the statement
/// failed before it was written, or none was sent): committed when `result` is a success, else
/// rolled back (the connection dropped when that fails). Answers `result`, or the commit's failure.
fn end_single<T>(conn: &mut Pooled<'_, PgConn>, result: TxResult<T>) -> TxResult<T> {
    if !conn.client.left_open() {
        return result;
    }
    match result {
        Ok(value) => conn.client.batch_execute("COMMIT").map(|()| value).map_err(Fail::Db),
        Err(fail) => {
            if conn.client.batch_execute("ROLLBACK").is_err() {
                conn.mark_broken();
            }
            Err(fail)
        }
    }
}

/// `postgres://user@host:port/dbname`, leaving out the password and other parameters.
fn label(config: &Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        // An IPv6 address in brackets, as a URL writes it (`[::1]:5432`).
        Some(Host::Tcp(host)) if host.contains(':') => format!("[{host}]"),
        Some(Host::Tcp(host)) => host.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    format!("postgres://{user}{host}:{port}/{}", config.get_dbname().unwrap_or(""))
}

/// Merges the indexes in `sp_journal_seen` into the runs, under the lock of the
/// `runs_merge_lock` row (`wait`: wait for it, else skip when another process is merging).
/// `all`: until none is left. An index more than `max_index_jump` beyond the highest so far is
/// noted as an index jump.
fn fold(tx: &mut Tx<'_>, label: &str, wait: bool, all: bool, options: &JournalOptions) -> TxResult<()> {
    let lock = if wait {
        "SELECT value FROM sp_journal_meta WHERE key = 'runs_merge_lock' FOR UPDATE"
    } else {
        "SELECT value FROM sp_journal_meta WHERE key = 'runs_merge_lock' FOR UPDATE SKIP LOCKED"
    };
    if tx.query_opt(lock, &[])?.is_none() {
        return Ok(());
    }
    loop {
        // In the order they arrived (as the server's clock dated them), so that a jump is judged
        // against the indexes seen before it, whenever the merge runs.
        let sql = concat!(
            "SELECT idx, COALESCE(at_ms, ",
            now_ms!(),
            ") AS at FROM sp_journal_seen ORDER BY at, idx LIMIT $1"
        );
        let rows = tx.query(sql, &[&FOLD_BATCH])?;
        let seen = rows
            .iter()
            .map(|r| Ok((r.try_get::<_, i64>(0)?, r.try_get::<_, i64>(1)?)))
            .collect::<std::result::Result<Vec<(i64, i64)>, tokio_postgres::Error>>()?;
        let indexes: Vec<i64> = seen.iter().map(|&(index, _)| index).collect();
        if indexes.is_empty() {
            break;
        }
        let configured_first = tx.meta("first_index")?;
        let arrived: Vec<(i64, i64, ())> = seen.iter().map(|&(index, at)| (index, at, ())).collect();
        for (index, previous, ()) in
            gaps::add_arrived(&mut PgRuns(tx), &arrived, configured_first, options.max_index_jump)?
        {
            admin::record_jump(&mut PgSql { tx, label }, JumpKind::Jump, index, Some(previous), None, None, None)?;
        }
        tx.execute("DELETE FROM sp_journal_seen WHERE idx = ANY($1)", &[&indexes])?;
        if !all || (indexes.len() as i64) < FOLD_BATCH {
            break;
        }
    }
    Ok(())
}

struct PgRuns<'a, 'b>(&'a mut Tx<'b>);

fn runs(rows: Vec<Row>) -> std::result::Result<Vec<Run>, tokio_postgres::Error> {
    rows.iter().map(|r| Ok(Run { lo: r.try_get(0)?, hi: r.try_get(1)? })).collect()
}

fn one_run(row: Option<Row>) -> std::result::Result<Option<Run>, tokio_postgres::Error> {
    row.map(|r| Ok(Run { lo: r.try_get(0)?, hi: r.try_get(1)? })).transpose()
}

impl Runs for PgRuns<'_, '_> {
    type Error = tokio_postgres::Error;

    fn at_or_before(&mut self, at: i64) -> std::result::Result<Option<Run>, tokio_postgres::Error> {
        let sql = "SELECT lo, hi FROM sp_journal_runs WHERE lo <= $1 ORDER BY lo DESC LIMIT 1";
        one_run(self.0.query_opt(sql, &[&at])?)
    }

    fn starting_within(&mut self, from: i64, to: i64) -> std::result::Result<Vec<Run>, tokio_postgres::Error> {
        runs(
            self.0
                .query("SELECT lo, hi FROM sp_journal_runs WHERE lo >= $1 AND lo <= $2 ORDER BY lo", &[&from, &to])?,
        )
    }

    fn remove(&mut self, lo: i64) -> std::result::Result<(), tokio_postgres::Error> {
        self.0.execute("DELETE FROM sp_journal_runs WHERE lo = $1", &[&lo]).map(drop)
    }

    fn put(&mut self, run: Run, seen: gaps::Seen) -> std::result::Result<(), tokio_postgres::Error> {
        /// `schema::RUNS_PUT` with `$N` parameters, made once.
        static RUNS_PUT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| dollar_params(schema::RUNS_PUT));
        self.0.execute(RUNS_PUT.as_str(), &[&run.lo, &run.hi, &seen.first_ms, &seen.last_ms]).map(drop)
    }

    fn after(&mut self, after: i64, limit: usize) -> std::result::Result<Vec<Run>, tokio_postgres::Error> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        runs(self.0.query("SELECT lo, hi FROM sp_journal_runs WHERE lo > $1 ORDER BY lo LIMIT $2", &[&after, &limit])?)
    }

    fn lowest(&mut self) -> std::result::Result<Option<Run>, tokio_postgres::Error> {
        one_run(self.0.query_opt("SELECT lo, hi FROM sp_journal_runs ORDER BY lo LIMIT 1", &[])?)
    }

    fn highest(&mut self) -> std::result::Result<Option<Run>, tokio_postgres::Error> {
        one_run(self.0.query_opt("SELECT lo, hi FROM sp_journal_runs ORDER BY lo DESC LIMIT 1", &[])?)
    }

    fn seen_below(&mut self, first: i64) -> std::result::Result<i64, tokio_postgres::Error> {
        let sql = "SELECT COALESCE(SUM(LEAST(hi, $1::bigint - 1) - lo + 1), 0)::bigint FROM sp_journal_runs WHERE lo < $1::bigint";
        match self.0.query_opt(sql, &[&first])? {
            Some(row) => row.try_get(0),
            None => Ok(0),
        }
    }
}

/// The journal's statements over a PostgreSQL transaction (`?1` parameters as `$1`).
struct PgSql<'a, 'b> {
    tx: &'a mut Tx<'b>,
    label: &'a str,
}

impl PgSql<'_, '_> {
    fn fail(&self, e: &tokio_postgres::Error) -> Error {
        let mut message = format!("{}: {e}", self.label);
        if let Some(db) = e.as_db_error() {
            message = format!("{message}: {} (SQLSTATE {})", db.message(), db.code().code());
        }
        Error::new(ErrorKind::Journal, message)
    }
}

/// The parameters of one of the statements shared with SQLite: integers as `int8`, text as `text`.
fn pg_params(params: &[Value]) -> Vec<&dyn Param> {
    params
        .iter()
        .map(|p| -> &dyn Param {
            match p {
                Value::Int(v) => v,
                Value::Text(v) => v,
            }
        })
        .collect()
}

impl Sql for PgSql<'_, '_> {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        self.tx.execute(&dollar_params(sql), &pg_params(params)).map_err(|e| self.fail(&e))
    }

    fn rows(&mut self, sql: &str, params: &[Value]) -> Result<Vec<SqlRow>> {
        use tokio_postgres::types::Type;
        let rows = self.tx.query(&dollar_params(sql), &pg_params(params)).map_err(|e| self.fail(&e))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let mut values = Vec::with_capacity(row.len());
            for (i, column) in row.columns().iter().enumerate() {
                let value = match *column.type_() {
                    Type::INT8 => Value::Int(row.try_get(i).map_err(|e| self.fail(&e))?),
                    Type::INT4 => {
                        Value::Int(row.try_get::<_, Option<i32>>(i).map_err(|e| self.fail(&e))?.map(i64::from))
                    }
                    Type::TEXT | Type::VARCHAR => Value::Text(row.try_get(i).map_err(|e| self.fail(&e))?),
                    Type::BYTEA => Value::Text(
                        row.try_get::<_, Option<Vec<u8>>>(i)
                            .map_err(|e| self.fail(&e))?
                            .map(|b| String::from_utf8_lossy(&b).into_owned()),
                    ),
                    _ => Value::Int(None),
                };
                values.push(value);
            }
            out.push(values);
        }
        Ok(out)
    }

    fn now_ms(&mut self) -> Result<i64> {
        let sql = concat!("SELECT ", now_ms!());
        let row = self.tx.query_one(sql, &[]).map_err(|e| self.fail(&e))?;
        row.try_get(0).map_err(|e| self.fail(&e))
    }

    /// The server's clock, for every host alike: no boot.
    fn lease_clock(&mut self) -> Result<LeaseClock> {
        let now = self.now_ms()?;
        Ok(LeaseClock { now_ms: now, boot: None, wall_ms: now })
    }

    fn lock_rows(&self) -> &'static str {
        " FOR UPDATE OF d SKIP LOCKED"
    }
}

const SEEN_INSERT: &str =
    concat!("INSERT INTO sp_journal_seen (idx, at_ms) VALUES ($1, ", now_ms!(), ") ON CONFLICT DO NOTHING");
/// Records the index (when `$8`) unless the key is held at another index (then it is not this
/// index's event: the third column answers that index, and the caller records the anomaly),
/// inserts the claim unless the key exists, counts it in progress: one statement, so the common
/// case of `begin` is one round trip.
const CLAIM_NEW: &str = concat!(
    "WITH seen AS (INSERT INTO sp_journal_seen (idx, at_ms) SELECT $4::bigint, ",
    now_ms!(),
    " WHERE $8::boolean AND $4::bigint IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sp_journal_delivery WHERE key = $1 AND first_index <> $4::bigint) ON CONFLICT DO NOTHING), ",
    "claimed AS (INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, token, attempts, created_ms, updated_ms, lease_until_ms) VALUES ($1, $2, $3, $4, $5, 'claimed', $6, 1, ",
    now_ms!(),
    ", ",
    now_ms!(),
    ", ",
    now_ms!(),
    " + $7) ON CONFLICT (key) DO NOTHING RETURNING 1), ",
    "counted AS (UPDATE sp_journal_counters SET claims_open = claims_open + 1 WHERE shard = $9 AND EXISTS (SELECT 1 FROM claimed)) ",
    "SELECT (SELECT count(*) FROM claimed), (SELECT key FROM sp_journal_delivery WHERE $4::bigint IS NOT NULL AND first_index = $4::bigint AND key <> $1 AND EXISTS (SELECT 1 FROM claimed) LIMIT 1), ",
    "(SELECT first_index FROM sp_journal_delivery WHERE $8::boolean AND key = $1 AND first_index <> $4::bigint)"
);
/// A repeat of a finished delivery, answered without the locking path: the stored reply of the
/// key's done row when its content matches, counted as replayed, in one statement. A finished
/// row never changes again, so reading it without a lock decides as `CLAIM_SELECT` would.
/// Columns: replays (0 or 1), the reply (NULL unless replayed); 0 sends the caller to the
/// locking path (a conflict, a live or expired claim, an abandoned one, a refused index). Run
/// only when the claim's insert found the key: new deliveries pay nothing for it.
const CLAIM_REPLAY: &str = concat!(
    "WITH replayed AS (SELECT reply FROM sp_journal_delivery WHERE key = $1 AND state = 'done' AND content = $2), ",
    "counted AS (UPDATE sp_journal_counters SET replayed = replayed + 1 WHERE shard = $3 AND EXISTS (SELECT 1 FROM replayed)) ",
    "SELECT (SELECT count(*) FROM replayed), (SELECT reply FROM replayed)"
);
/// The row `claims::decide` decides on, and (last column) the token of its claim, by which a
/// call recognises its own claim (`claims::own_claim`).
const CLAIM_SELECT: &str = concat!(
    "SELECT content, state, attempts, lease_until_ms, reply, ",
    now_ms!(),
    ", token, finished_ms IS NOT NULL AS finished_before FROM sp_journal_delivery WHERE key = $1 FOR UPDATE"
);
const CLAIM_TAKE_OVER: &str = concat!(
    "UPDATE sp_journal_delivery SET state = 'claimed', token = $2, attempts = $3, updated_ms = ",
    now_ms!(),
    ", lease_until_ms = ",
    now_ms!(),
    " + $4 WHERE key = $1"
);
/// A statement storing the reply of a live claim, no longer in progress (handled: counted by its
/// done row, see `schema::COUNTERS_SUM`; `$1` key, `$2` token, `$3` reply, `$4` the counters'
/// shard), committed as durably as `$5` says
/// (`synchronous_commit` of its transaction: `on` for `Synchronous::Full`); `$also` is added to
/// its condition, `$answer` is what it answers.
macro_rules! finish_sql {
    ($also:literal, $answer:literal) => {
        concat!(
            "WITH durable AS (SELECT set_config('synchronous_commit', $5::text, true)), ",
            "finished AS (UPDATE sp_journal_delivery SET state = 'done', reply = $3, token = NULL, updated_ms = ",
            now_ms!(),
            ", finished_ms = ",
            now_ms!(),
            " WHERE key = $1 AND state = 'claimed' AND token = $2",
            $also,
            " RETURNING 1), ",
            "counted AS (UPDATE sp_journal_counters SET claims_open = claims_open - 1 WHERE shard = $4 AND EXISTS (SELECT 1 FROM finished)) ",
            $answer
        )
    };
}
/// Stores the reply in its own transaction; answers the count stored.
const FINISH: &str = finish_sql!("", "SELECT count(*) FROM finished, durable");
/// Locks the claimed row while it is this worker's and sets the transaction's guard (a
/// transaction-local setting that `FINISH_GUARDED` requires): no row when the claim is not held.
const HOLD: &str = "SELECT set_config('slotpartner.guard', 'on', true) FROM sp_journal_delivery WHERE key = $1 AND state = 'claimed' AND token = $2 FOR UPDATE";
/// `FINISH` inside the transaction `HOLD` began, storing the reply only while the guard is still
/// set: a staged statement that ended the transaction leaves it unset. Answers the count and
/// the guard.
const FINISH_GUARDED: &str = finish_sql!(
    " AND current_setting('slotpartner.guard', true) = 'on'",
    "SELECT (SELECT count(*) FROM finished), current_setting('slotpartner.guard', true) FROM durable"
);
/// Whether the journal holds a row for the key `$1`, its numbering and its schema version.
const HOLDS: &str = "SELECT EXISTS (SELECT 1 FROM sp_journal_delivery WHERE key = $1), (SELECT value FROM sp_journal_meta WHERE key = 'numbering'), (SELECT value FROM sp_journal_meta WHERE key = 'schema_version')";
/// What the storing statements (`FINISH_UNWRITTEN`, `FINISH_UNWRITTEN_KEPT`) fail with when
/// they store nothing, followed by the reason (`guard`, `numbering`, `key`): a text a cast to
/// `integer` refuses (SQLSTATE 22P02), quoted whole in the server's message whatever its
/// language, between that language's quotation marks (`"..."`, `»...«`, `« ... »`).
macro_rules! not_stored {
    () => {
        "slotpartner: not stored: "
    };
}

/// The column that makes a storing statement fail where it stored nothing, from the columns
/// `stored`, `guard` and `numbered` of its answer (see `store_unwritten_answer!`): 0, or the
/// cast of `not_stored!` and the reason, which the server refuses. The reason is not a
/// constant, so the cast is made only when the row is read, never when the statement is planned.
macro_rules! not_stored_unless {
    () => {
        concat!(
            "CASE WHEN stored = 1 THEN 0 ELSE CAST('",
            not_stored!(),
            "' || CASE WHEN guard IS DISTINCT FROM 'on' THEN 'guard' WHEN NOT numbered THEN 'numbering' ELSE 'key' END AS integer) END"
        )
    };
}

/// Stores a delivery claimed at finish (`Claim::unwritten`), done, with its reply (`$1` key, `$2`
/// name, `$3` transactionId, `$4` index, `$5` content, `$6` token, `$7` reply), unless the key
/// has a row by now; records its index (handled: counted by its done row, see
/// `schema::COUNTERS_SUM`), committed as durably as `$8` says (see `finish_sql!`). In a
/// `Mode::AtFinish` transaction: only while its guard is set (the staged statements ran before
/// it), and only while the journal's numbering is still `$9` (a renumbering waits for the
/// transaction, or committed before this statement began and nothing is stored). The token
/// stays in the row: a run after a lost connection recognises its own first run by it. Answers
/// the count stored, the guard, another key first delivered at the same index (a reused
/// index), and whether the numbering was still `$9` and the schema version still `$10` (this
/// release's: a claim of `Journal::begin_optimistic` is handed out without reading the journal,
/// so a journal another release migrated meanwhile is met here, and nothing is stored).
///
/// Run as the function `sp_journal_store_unwritten` (`STORE_UNWRITTEN_FUNCTION`, created with
/// the schema): PL/pgSQL keeps the statement's plan for the server connection, whichever client
/// a pooler in transaction mode lends it to, where the statement sent unnamed was parsed and
/// planned at every delivery (127 µs of planning against 57 µs of running it, see
/// docs/experiments-2026-12.md); the call itself is planned in a few µs. Its parameters are the
/// statement's, in order; `$1`... in the body are the function's.
///
/// The call is wrapped so that it fails where the function stored nothing, as
/// `FINISH_UNWRITTEN_KEPT` does (`not_stored_unless!`): the function, created by whichever release
/// migrated the journal, answers without failing.
const FINISH_UNWRITTEN: &str = concat!(
    "SELECT stored, guard, reused, numbered, ",
    not_stored_unless!(),
    " FROM sp_journal_store_unwritten($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS answer (stored, guard, reused, numbered)"
);

/// `store_function_exists!` read in `tx`.
fn store_function_exists(tx: &mut Tx<'_>) -> TxResult<bool> {
    Ok(tx.query_one(concat!("SELECT ", store_function_exists!()), &[])?.try_get(0)?)
}

/// The storing statement's common table expressions: the commit made durable (`$8`), the
/// numbering (`$9`) and schema version (`$10`) checked, the delivery inserted done (while the
/// guard is set), its index recorded.
macro_rules! store_unwritten_ctes {
    () => {
        concat!(
            "WITH durable AS (SELECT set_config('synchronous_commit', $8::text, true)), ",
            "numbered AS (SELECT 1 FROM sp_journal_meta WHERE key = 'numbering' AND value = $9 AND EXISTS (SELECT 1 FROM sp_journal_meta WHERE key = 'schema_version' AND value = $10)), ",
            "finished AS (INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, token, attempts, created_ms, updated_ms, lease_until_ms, finished_ms, reply) SELECT $1, $2, $3, $4, $5, 'done', $6, 1, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ", 0, ",
            now_ms!(),
            ", $7 FROM numbered WHERE current_setting('slotpartner.guard', true) = 'on' ON CONFLICT (key) DO NOTHING RETURNING 1), ",
            seen_when!("finished")
        )
    };
}

/// The storing statement's answer (its columns, from `durable`): whether the delivery was
/// stored (0 or 1), the guard, the key of another delivery at its index, whether the numbering
/// and version were the expected ones.
macro_rules! store_unwritten_answer {
    () => {
        concat!(
            "SELECT (SELECT count(*) FROM finished), current_setting('slotpartner.guard', true), ",
            "(SELECT key FROM sp_journal_delivery WHERE $4::bigint IS NOT NULL AND first_index = $4::bigint AND key <> $1 AND EXISTS (SELECT 1 FROM finished) LIMIT 1), ",
            "EXISTS (SELECT 1 FROM numbered) FROM durable"
        )
    };
}

/// The storing statement `FINISH_UNWRITTEN` runs (see there), as one literal: the body of the
/// function `STORE_UNWRITTEN_FUNCTION` makes.
macro_rules! store_unwritten {
    () => {
        concat!(store_unwritten_ctes!(), " ", store_unwritten_answer!())
    };
}

/// `FINISH_UNWRITTEN`'s statement itself, sent instead of the call where the connection keeps
/// the journal's statements prepared and has room for this one (`statement_cache_size`, never
/// behind a pooler in transaction mode): planned once a connection either way, and the
/// function's own frame, about 30 µs of the server's time a delivery, is spared
/// (docs/experiments-2026-12.md, 21:15 UTC). The same parameters and answer, a fifth column
/// (`not_stored_unless!`) making it fail where it stores nothing, so that the server rolls the
/// transaction back itself and its `COMMIT` can be written right behind it, in the same round
/// trip (`Postgres::finish_unwritten`).
const FINISH_UNWRITTEN_KEPT: &str = concat!(
    store_unwritten_ctes!(),
    ", answer (stored, guard, reused, numbered) AS (",
    store_unwritten_answer!(),
    ") SELECT stored, guard, reused, numbered, ",
    not_stored_unless!(),
    " FROM answer"
);

/// The reason a storing statement stored nothing (`guard`, `numbering`, `key`), when `e` is
/// its failure saying so (SQLSTATE 22P02, the text `not_stored!` and the reason in the message,
/// the reason ended by the closing quotation mark of whichever language the server speaks:
/// `lc_messages` translates the message and its marks, never the text quoted).
fn not_stored(e: &tokio_postgres::Error) -> Option<&'static str> {
    let db = e.as_db_error().filter(|db| *db.code() == SqlState::INVALID_TEXT_REPRESENTATION)?;
    let (_, quoted) = db.message().split_once(not_stored!())?;
    let reason = quoted.split(|c: char| !c.is_ascii_alphabetic()).next()?;
    ["guard", "numbering", "key"].into_iter().find(|r| *r == reason)
}

/// Creates (or replaces, by a migration run again) the function `FINISH_UNWRITTEN` calls: the
/// storing statement, run by `RETURN QUERY`. Version 4's, on PostgreSQL.
const STORE_UNWRITTEN_FUNCTION: &str = concat!(
    "CREATE OR REPLACE FUNCTION sp_journal_store_unwritten(text, text, bigint, bigint, text, bytea, bytea, text, bigint, bigint) ",
    "RETURNS TABLE (out_stored bigint, out_guard text, out_reused text, out_numbered boolean) LANGUAGE plpgsql AS $store$ BEGIN RETURN QUERY ",
    store_unwritten!(),
    "; END $store$"
);
/// Whether the key `$1` holds a row carrying the token `$2`: a claimed-at-finish delivery stored
/// by a run of `FINISH_UNWRITTEN` whose answer was lost with its connection; or the key `$3`, the
/// one a renumbering since gave it (`admin::numbering_prefix`).
const STORED_BY_TOKEN: &str = "SELECT EXISTS (SELECT 1 FROM sp_journal_delivery WHERE key IN ($1, $3) AND token = $2)";
/// A finish of a claim at finish whose key was stored by another delivery meanwhile (see
/// `Postgres::finish_unwritten`), in a `Mode::AtFinish` transaction: whether the numbering is
/// still `$5`, and the state and attempts of the key `$1`'s row and whether it is done with the
/// content `$2` and the reply `$3`. When it is, and in that numbering, the index `$4` is
/// recorded and a replay counted in shard `$6`.
const STORED_ALIKE: &str = concat!(
    "WITH numbered AS (SELECT 1 FROM sp_journal_meta WHERE key = 'numbering' AND value = $5), ",
    "found AS (SELECT state, attempts, state = 'done' AND content = $2 AND reply = $3 AS alike, first_index FROM sp_journal_delivery WHERE key = $1), ",
    "answered AS (SELECT 1 FROM found WHERE alike AND EXISTS (SELECT 1 FROM numbered)), ",
    "own AS (SELECT 1 FROM found WHERE alike AND EXISTS (SELECT 1 FROM numbered) AND (first_index IS NULL OR first_index = $4::bigint)), ",
    seen_when!("own"),
    ", ",
    "counted AS (UPDATE sp_journal_counters SET replayed = replayed + 1 WHERE shard = $6 AND EXISTS (SELECT 1 FROM answered)) ",
    "SELECT EXISTS (SELECT 1 FROM numbered), (SELECT state FROM found), (SELECT attempts FROM found), COALESCE((SELECT alike FROM found), false), ",
    "(SELECT first_index FROM found WHERE alike AND $4::bigint IS NOT NULL AND first_index <> $4::bigint)"
);
/// `abandon` of a delivery claimed at finish: stores it abandoned (`$1`..`$5` as for
/// `FINISH_UNWRITTEN`) with its index, so that it counts unfinished and recovery fetches it,
/// unless the key has a row by now; in a `Mode::AtFinish` transaction, only while the
/// numbering is still `$6` (see `FINISH_UNWRITTEN`). Answers whether it was.
const ABANDON_UNWRITTEN: &str = concat!(
    "WITH numbered AS (SELECT 1 FROM sp_journal_meta WHERE key = 'numbering' AND value = $6), ",
    "abandoned AS (INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, attempts, created_ms, updated_ms, lease_until_ms) SELECT $1, $2, $3, $4, $5, 'abandoned', 1, ",
    now_ms!(),
    ", ",
    now_ms!(),
    ", 0 FROM numbered ON CONFLICT (key) DO NOTHING RETURNING 1), ",
    seen_when!("abandoned"),
    " ",
    "SELECT EXISTS (SELECT 1 FROM numbered)"
);
const ABANDON: &str = concat!(
    "WITH abandoned AS (UPDATE sp_journal_delivery SET state = 'abandoned', token = NULL, lease_until_ms = 0, updated_ms = ",
    now_ms!(),
    " WHERE key = $1 AND state = 'claimed' AND token = $2 RETURNING 1), ",
    "counted AS (UPDATE sp_journal_counters SET claims_open = claims_open - 1 WHERE shard = $3 AND EXISTS (SELECT 1 FROM abandoned)) ",
    "SELECT count(*) FROM abandoned"
);
const REFUSED_INSERT: &str = concat!(
    "WITH seen AS (INSERT INTO sp_journal_seen (idx, at_ms) VALUES ($1, ",
    now_ms!(),
    ") ON CONFLICT DO NOTHING), ",
    "refused AS (INSERT INTO sp_journal_refused (idx, name, transaction_id, at_ms) VALUES ($1, $2, $3, ",
    now_ms!(),
    ")) UPDATE sp_journal_counters SET refused = refused + 1 WHERE shard = $4"
);
const STATE_SELECT: &str = "SELECT state, attempts FROM sp_journal_delivery WHERE key = $1";

fn lost_state(tx: &mut Tx<'_>, claim: &Claim) -> TxResult<Option<(RecordState, i64)>> {
    match tx.query_opt(STATE_SELECT, &[&claim.key])? {
        Some(row) => Ok(Some((RecordState::parse(row.try_get(0)?)?, row.try_get(1)?))),
        None => Ok(None),
    }
}

/// `SELECT count(*)` as a number.
fn counted(row: Option<Row>) -> std::result::Result<i64, tokio_postgres::Error> {
    row.map_or(Ok(0), |row| row.try_get(0))
}

impl super::Store for Postgres {
    fn quiet_for_fork(&self) -> bool {
        false
    }

    fn claim(&self, delivery: &Delivery, key: &str, first_look: bool, options: &JournalOptions) -> Result<Step> {
        let token = claims::new_token()?;
        let pid = std::process::id();
        let shard = self.shard();
        let lease = options.lease_ms();
        let index = delivery.index();
        let transaction_id = delivery.transaction_id();
        let claim = |attempt, differing, reply_pruned| Claim {
            key: key.to_owned(),
            token,
            attempt,
            index,
            transaction_id,
            differing,
            pid,
            reply_pruned,
            unwritten: None,
        };
        let (inserted, reused_from, held_at) = self.transaction(options, Mode::Single, |tx| {
            let params: Params<'_> = &[
                &key,
                &delivery.name(),
                &transaction_id,
                &index,
                &delivery.stored(),
                &&token[..],
                &lease,
                &first_look,
                &shard,
            ];
            let row = tx.query_one(CLAIM_NEW, params)?;
            Ok((
                row.try_get::<_, i64>(0)? == 1,
                row.try_get::<_, Option<String>>(1)?,
                row.try_get::<_, Option<i64>>(2)?,
            ))
        })?;
        if let (Some(at), Some(index)) = (held_at, index) {
            // Not this index's event: the index was not counted seen (see `CLAIM_NEW`).
            self.transaction(options, Mode::Normal, |tx| {
                let sql = &mut PgSql { tx, label: &self.label };
                Ok(admin::record_jump(sql, JumpKind::Moved, index, Some(at), Some(key), Some(delivery.name()), None)?)
            })?;
        }
        if first_look && index.is_some() {
            self.maybe_fold(options);
        }
        if inserted {
            if let (Some(other), Some(index)) = (reused_from, index) {
                self.record_reused(index, key, delivery.name(), &other, options)?;
            }
            return Ok(Step::Answer(Begin::New(claim(1, Vec::new(), false))));
        }
        let replayed = self.transaction(options, Mode::Single, |tx| {
            let row = tx.query_one(CLAIM_REPLAY, &[&key, &delivery.stored(), &shard])?;
            let replays: i64 = row.try_get(0)?;
            Ok(if replays == 1 { Some(row.try_get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default()) } else { None })
        })?;
        if let Some(reply) = replayed {
            return Ok(Step::Answer(Begin::Done(reply)));
        }
        self.transaction(options, Mode::Normal, |tx| {
            let Some(row) = tx.query_opt(CLAIM_SELECT, &[&key])? else {
                // Not there after all (its insert failed): look again.
                return Ok(Step::Held);
            };
            let first_content = key::from_stored(row.try_get(0)?).into_owned();
            let existing = Existing {
                content: first_content.clone(),
                state: RecordState::parse(row.try_get(1)?)?,
                attempts: row.try_get(2)?,
                lease_until_ms: row.try_get(3)?,
                reply: row.try_get(4)?,
                now_ms: row.try_get(5)?,
                finished_before: row.try_get("finished_before")?,
            };
            let holder: Option<Vec<u8>> = row.try_get("token")?;
            if let Some((attempt, differing)) = claims::own_claim(&existing, holder.as_deref(), &token, delivery) {
                let pruned = existing.finished_before;
                return Ok(Step::Answer(Begin::New(claim(attempt, differing, pruned))));
            }
            Ok(match claims::decide(existing, delivery) {
                Decision::Conflict { error, differing, stored } => {
                    let seen = ConflictSeen::of(delivery, key, &first_content, &differing, false);
                    let answered = admin::answer_conflict(&mut PgSql { tx, label: &self.label }, &seen)?;
                    if let (true, Some(stored)) = (answered, stored) {
                        tx.bump(shard, Counter::Replayed, 1)?;
                        Step::Answer(Begin::Done(stored))
                    } else {
                        tx.bump(shard, Counter::Conflicts, 1)?;
                        Step::Answer(Begin::Conflict(error))
                    }
                }
                Decision::Replay(reply) => {
                    tx.bump(shard, Counter::Replayed, 1)?;
                    Step::Answer(Begin::Done(reply))
                }
                Decision::TakeOver { attempt, reopened, differing, pruned } => {
                    tx.execute(CLAIM_TAKE_OVER, &[&key, &&token[..], &attempt, &lease])?;
                    if reopened {
                        tx.bump(shard, Counter::InProgress, 1)?;
                    }
                    if pruned {
                        // The digest matched: the full content comes back with this delivery.
                        tx.execute(
                            "UPDATE sp_journal_delivery SET content = $2 WHERE key = $1",
                            &[&key, &delivery.stored()],
                        )?;
                    }
                    if !differing.is_empty() {
                        tx.bump(shard, Counter::Conflicts, 1)?;
                        admin::record_conflict(
                            &mut PgSql { tx, label: &self.label },
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
        let (held, numbering, version) = self.transaction(options, Mode::Single, |tx| {
            let row = tx.query_one(HOLDS, &[&key])?;
            Ok((row.try_get(0)?, row.try_get::<_, Option<i64>>(1)?.unwrap_or(1), row.try_get::<_, Option<i64>>(2)?))
        })?;
        // The open may have skipped this check (see `Settled`): a journal another release
        // changed meanwhile is refused here, before anything is handed out.
        settled::current_at_claim(&self.label, version)?;
        Ok((held, numbering))
    }

    fn numbering_hint(&self) -> &std::sync::atomic::AtomicI64 {
        &self.numbering_hint
    }

    fn record_seen(&self, index: i64, options: &JournalOptions) -> Result<()> {
        self.transaction(options, Mode::Single, |tx| Ok(tx.execute(SEEN_INSERT, &[&index]).map(drop)?))?;
        self.maybe_fold(options);
        Ok(())
    }

    fn finish(&self, claim: &Claim, reply: &[u8], staged: &[Staged], options: &JournalOptions) -> Result<()> {
        let shard = self.shard();
        let commit = match options.synchronous {
            Synchronous::Full => "on",
            Synchronous::Normal => "off",
        };
        if let Some(unwritten) = &claim.unwritten {
            return self.finish_unwritten(claim, unwritten, reply, staged, commit, options);
        }
        let (done, retried) = if staged.is_empty() {
            self.transaction_retried(options, Mode::Single, |tx| {
                Ok(counted(tx.query_opt(FINISH, &[&claim.key, &&claim.token[..], &reply, &shard, &commit])?)? == 1)
            })?
        } else {
            self.finish_staged(claim, reply, staged, shard, commit, options)?
        };
        if done {
            return Ok(());
        }
        let now = self.transaction(options, Mode::Single, |tx| lost_state(tx, claim))?;
        if retried && claims::settled_at_own_attempt(claim, now, RecordState::Done) {
            return Ok(()); // stored by the first run, whose answer was lost with its connection
        }
        Err(claims::lost_error(claim, "finish", now))
    }

    fn abandon(&self, claim: &Claim, options: &JournalOptions) -> Result<()> {
        if let Some(unwritten) = &claim.unwritten {
            let params: Params<'_> = &[
                &claim.key,
                &unwritten.name,
                &claim.transaction_id,
                &claim.index,
                &unwritten.content,
                &unwritten.numbering,
            ];
            let numbered = self.transaction(options, Mode::AtFinish, |tx| {
                Ok(tx.query_one(ABANDON_UNWRITTEN, params)?.try_get::<_, bool>(0)?)
            })?;
            return if numbered {
                Ok(())
            } else {
                Err(claims::renumbered_error(claim, "abandon", unwritten.numbering))
            };
        }
        let shard = self.shard();
        let (abandoned, retried) = self.transaction_retried(options, Mode::Single, |tx| {
            Ok(counted(tx.query_opt(ABANDON, &[&claim.key, &&claim.token[..], &shard])?)? == 1)
        })?;
        if abandoned {
            return Ok(());
        }
        let now = self.transaction(options, Mode::Single, |tx| lost_state(tx, claim))?;
        if retried && claims::settled_at_own_attempt(claim, now, RecordState::Abandoned) {
            return Ok(()); // released by the first run, whose answer was lost with its connection
        }
        Err(claims::lost_error(claim, "abandon", now))
    }

    fn record_refused(
        &self,
        index: i64,
        name: Option<&str>,
        transaction_id: Option<i64>,
        options: &JournalOptions,
    ) -> Result<()> {
        let shard = self.shard();
        self.transaction(options, Mode::Single, |tx| {
            Ok(tx.execute(REFUSED_INSERT, &[&index, &name, &transaction_id, &shard]).map(drop)?)
        })?;
        self.maybe_fold(options);
        Ok(())
    }

    fn admin(&self, access: Access, work: AdminWork<'_>, options: &JournalOptions) -> Result<()> {
        // An operator's change is not made twice: not run again once its COMMIT was sent.
        let mode = if access == Access::Read { Mode::Normal } else { Mode::Once };
        self.transaction(options, mode, |tx| {
            if access == Access::Renumber {
                // Before the seen indexes are merged: a claim at finish in flight records its
                // index in the numbering it was claimed in, or none.
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&NUMBERING_LOCK])?;
            }
            fold(tx, &self.label, true, true, options)?;
            Ok(work(&mut PgSql { tx, label: &self.label })?)
        })
    }

    fn counters(&self, options: &JournalOptions) -> Result<[i64; 5]> {
        self.transaction(options, Mode::Single, |tx| {
            let mut sums = [0i64; 5];
            if let Some(row) = tx.query_opt(schema::COUNTERS_SUM, &[])? {
                for (i, sum) in sums.iter_mut().enumerate() {
                    *sum = row.try_get(i)?;
                }
            }
            Ok(sums)
        })
    }

    fn size_bytes(&self, options: &JournalOptions) -> Result<Option<u64>> {
        let sql = "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c WHERE c.relkind = 'r' AND c.relname LIKE 'sp\\_journal\\_%' AND c.relnamespace = current_schema()::regnamespace";
        self.transaction(options, Mode::Single, |tx| {
            let bytes: i64 = tx.query_one(sql, &[])?.try_get(0)?;
            Ok(u64::try_from(bytes).ok())
        })
    }

    /// PostgreSQL's autovacuum makes the space of deleted and updated rows reusable.
    fn reclaim_step(&self, _options: &JournalOptions) -> Result<(u64, bool)> {
        Ok((0, false))
    }

    fn lookup(&self, transaction_id: i64, options: &JournalOptions) -> Result<Vec<Record>> {
        self.transaction(options, Mode::Normal, |tx| {
            // By the keys it can have (`key::transaction_keys`): no index of `transaction_id`.
            let sql = "SELECT key, name, transaction_id, first_index, state, attempts, created_ms, updated_ms, lease_until_ms, finished_ms, reply FROM sp_journal_delivery WHERE key IN ($1, $2) AND transaction_id = $3 ORDER BY id";
            let [refund, payout] = super::key::transaction_keys(transaction_id);
            let mut records = Vec::new();
            for r in tx.query(sql, &[&refund, &payout, &transaction_id])? {
                let state = RecordState::parse(r.try_get(4)?)?;
                records.push(Record {
                    key: r.try_get(0)?,
                    name: r.try_get(1)?,
                    transaction_id: r.try_get(2)?,
                    index: r.try_get(3)?,
                    state,
                    attempts: r.try_get(5)?,
                    created_ms: r.try_get(6)?,
                    updated_ms: r.try_get(7)?,
                    lease_until_ms: if state == RecordState::Claimed { r.try_get(8)? } else { None },
                    finished_ms: r.try_get(9)?,
                    reply: r.try_get(10)?,
                });
            }
            let sql = "SELECT idx, name, transaction_id, at_ms FROM sp_journal_refused WHERE transaction_id = $1 ORDER BY id";
            for r in tx.query(sql, &[&transaction_id])? {
                let index: i64 = r.try_get(0)?;
                let at: i64 = r.try_get(3)?;
                records.push(Record {
                    key: format!("refused:{index}"),
                    name: r.try_get(1)?,
                    index: Some(index),
                    transaction_id: r.try_get(2)?,
                    state: RecordState::Refused,
                    attempts: 0,
                    created_ms: at,
                    updated_ms: at,
                    lease_until_ms: None,
                    finished_ms: None,
                    reply: None,
                });
            }
            Ok(records)
        })
    }

    /// Not the library's to do: PostgreSQL has its own tools, and the message names them.
    fn backup(&self, _dest: &std::path::Path, _options: &JournalOptions) -> Result<super::BackupReport> {
        Err(Error::field(ErrorKind::InvalidArgument, "journal_url", super::backup::POSTGRES_HINT))
    }
}

#[cfg(test)]
mod tests {
    use super::{Config, label};

    #[test]
    fn labels_name_user_host_port_and_database_only() {
        let label_of = |url: &str| label(&url.parse::<Config>().unwrap());
        assert_eq!(
            label_of("postgres://partner:secret@db.internal/journal"),
            "postgres://partner@db.internal:5432/journal"
        );
        assert_eq!(label_of("postgres://partner@[::1]:5433/journal"), "postgres://partner@[::1]:5433/journal");
        assert_eq!(label_of("postgres://127.0.0.1/journal"), "postgres://127.0.0.1:5432/journal");
    }
}
