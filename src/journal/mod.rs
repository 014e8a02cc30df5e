//! The delivery journal: every delivery handled once, repeats answered with the first reply, and
//! lost events found by their index.
//!
//! It is the idempotent-consumer pattern with a stored reply. Opened from a URL, `sqlite:PATH`
//! (one file that every process and thread of a host shares) or `postgres://...` (several hosts):
//!
//! ```text
//! event = receiver.handle(...)              # authenticated, validated
//! match journal.begin(&Delivery::of(&event))
//!   New(claim)     -> run the partner's logic -> journal.finish(&claim, reply) -> send reply
//!   Done(reply)    -> send the stored reply, byte for byte; run nothing
//!   Busy           -> another worker holds it (begin waited `busy_wait` first): answer 503
//!   Conflict(err)  -> same key, other content: refuse (409); the first stays
//!   NotReplayable  -> a balance query: run the logic, send its reply, nothing to finish
//! partner's transient failure -> journal.abandon(&claim), answer 503: the next delivery runs it again
//! worker died    -> its claim's lease expires; the next delivery gets New with attempt 2
//! ```
//!
//! Exactly once across a crash between the partner's own commit and `finish` needs the partner's
//! ledger to refuse a second credit for the same `transactionId` (a unique key): attempt 2 then
//! finds the credit made and answers as the first attempt would have.
//!
//! Its layers, each naming only the same or lower ones (tests/journal_layers.rs refuses an arrow up):
//!
//! - The top: this file, the `Journal` and the delivery logic (`begin`, `finish`, `abandon`, ...),
//!   with `operator/`, the operator's work on a journal (retention, export, recovery and its lock):
//!   `Journal`'s operator methods run it and it holds a `Journal`, so the two call each other.
//! - `store/`: the storage backends (SQLite, PostgreSQL) and what they share: the tables, one
//!   statement interface and the bookkeeping written once over it (`admin`), connections per
//!   process and across `fork`, the lock rows' holders, online backup. From this file it names
//!   only the contract declared here for it (the `Store` trait and the types its methods speak,
//!   imported in `store/mod.rs`); never `Journal`, never `operator/`.
//! - `model/`: what a delivery is: its key and canonical content, a claim, staged statements, the
//!   gap arithmetic, times. It names nothing of the journal above it.

mod model;
mod operator;
mod store;

use model::{claims, key, staged, time};
pub use operator::recovery;
use operator::{export, export_format, prune, recovery_lock};
pub(crate) use store::fork_guard;
use store::{admin, backup, lock, postgres, schema, sql, sqlite};

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::callback::json::{excerpt_of, quoted};
use crate::error::{Error, ErrorKind, Result};

pub use admin::{ConflictRecord, FetchOutcome, IndexJump, JumpKind, LockHolder, Resolution};
pub use backup::BackupReport;
pub use claims::{Claim, RecordState};
pub use export::ExportRow;
pub use export_format::{COLUMNS as EXPORT_COLUMNS, ExportFormat, ExportWriter};
pub use key::{DECISIVE, Delivery, decisive_differences};
pub use lock::{RECOVERY_LOCK, holder_text, host_name};
pub use prune::{PruneOptions, PruneReport};
pub use recovery_lock::RecoveryLock;
pub use staged::{MAX_PARAMS, MAX_SQL_BYTES, MAX_STAGED, SqlValue, Staged, check_room as check_staged_room};
pub use time::{parse_time, rfc3339_ms};

/// The schema version this release writes; it migrates journals of versions 1 and 2 when it
/// opens them and refuses newer ones.
pub const SCHEMA_VERSION: i64 = schema::VERSION;

use sql::Sql;

/// How durably a stored reply is written (SQLite's `synchronous` for the transaction of `finish`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Synchronous {
    /// Flushed to disk before `finish` returns (SQLite `synchronous=FULL`, PostgreSQL
    /// `synchronous_commit=on`): a stored reply survives a power loss.
    Full,
    /// Written, flushed later (SQLite `synchronous=NORMAL` in WAL mode, PostgreSQL
    /// `synchronous_commit=off`): survives a crash of the process, not of the machine.
    Normal,
}

/// How a journal behaves. Plain data: cheap to clone, shareable across threads.
///
/// Claims (`begin`, `abandon`, `record_refused`) are always written as `Synchronous::Normal`:
/// a claim lost to a power loss only makes the next delivery run the partner's logic again,
/// which its ledger's unique `transactionId` absorbs; the next durable `finish` flushes it too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalOptions {
    /// How long a claim is held for a worker that neither finishes nor abandons it (it died)
    /// before the next delivery takes it over as a new attempt. Default 30 s.
    pub lease: Duration,
    /// How long `begin` waits for another worker's live claim on the same key, answering `Done`
    /// if that worker finishes meanwhile, else `Busy`. Default 2 s.
    pub busy_wait: Duration,
    /// How durably a stored reply is written. Default `Full`.
    pub synchronous: Synchronous,
    /// The index gap detection counts from. `None`: the journal's stored first index if one was
    /// configured before, else the lowest index seen. A value given is stored in the journal, so
    /// that every process and a later `status` count from it. Default `None`.
    pub first_index: Option<i64>,
    /// The largest reply `finish` stores, in bytes. Default 64 KiB.
    pub max_reply_bytes: usize,
    /// How long one statement waits for a lock another process holds (SQLite's busy time-out,
    /// PostgreSQL's `lock_timeout`), and PostgreSQL's connect time-out unless the URL sets
    /// `connect_timeout`. Default 5 s.
    pub lock_timeout: Duration,
    /// PostgreSQL: how long one round trip waits for the server's answer before the connection
    /// is closed and the call fails with the journal's (transient) error; the URL's
    /// `command_timeout` (seconds, asyncpg's name) wins over it. `None`: `lock_timeout` + 10 s
    /// (15 s with the defaults), so that a lock wait ends at the server, with its own error,
    /// before the client gives up. Not used by SQLite, whose waits are its busy time-out
    /// (`lock_timeout`). Default `None`.
    pub command_timeout: Option<Duration>,
    /// How far beyond the highest index seen an index may land and still open a gap of its
    /// size. Beyond it the index is recorded as an index jump (see `Journal::index_jumps`): the
    /// stretch between is not counted missing, and the operator sees and decides it. Default
    /// 100,000: more events than a busy service sends between two recovery runs, fewer than a
    /// stray index makes.
    pub max_index_jump: i64,
    /// How many runs of recovery may get HTTP 404 for an index before it is reported
    /// unrecoverable and no longer fetched (it stays missing until resolved by hand). Default 3.
    pub not_found_limit: u32,
    /// Retention run by the library itself: when set, `finish` runs one batch of
    /// `Journal::prune` with `PruneOptions::older_than(retention)` (compact records kept) at
    /// most once a second per journal handle, after its own commit (the delivery waits for that
    /// batch: a few milliseconds, once a second). A failure of that batch does not fail the
    /// `finish`. At least a day. Default `None`: nothing is pruned unless asked
    /// (`slotpartner journal prune` from cron).
    pub retention: Option<Duration>,
    /// Whether a new delivery's claim is written only by `finish`, with the stored reply, in one
    /// transaction (`true`), instead of by `begin` in a commit of its own (`false`, the default).
    ///
    /// With `true`, `begin` only reads the journal for a key it does not hold yet and hands out
    /// a claim nothing was written for; `finish` then stores the delivery, done, together with
    /// its staged statements and its index, with one commit: half the journal's writes and
    /// commits a delivery. What it gives up: two deliveries of one key arriving at once may both
    /// run the partner's logic (nothing marks the first in progress); the one whose `finish`
    /// commits first is stored, and none of the other's staged statements take effect: its
    /// `finish` succeeds when the stored delivery has the same content and the very same reply
    /// (the event was handled once, and this reply is the stored one), else fails with
    /// `ClaimLost` (answer 503: the service delivers again and gets the stored reply). So
    /// choose it only when everything the logic does is
    /// staged (`Journal::finish_with`) or absorbed by the ledger's unique `transactionId`,
    /// never when it calls out (a wallet's API) before `finish`. A worker dying before its
    /// `finish` leaves nothing: the index stays missing (recovery fetches it) instead of an
    /// unfinished claim; `abandon` stores the delivery as abandoned, as without this option.
    /// A key the journal holds already (a repeat, an abandoned or expired claim) is claimed by
    /// `begin` as without it. Default `false`.
    pub claim_at_finish: bool,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            lease: Duration::from_secs(30),
            busy_wait: Duration::from_secs(2),
            synchronous: Synchronous::Full,
            first_index: None,
            max_reply_bytes: 64 * 1024,
            lock_timeout: Duration::from_secs(5),
            command_timeout: None,
            max_index_jump: 100_000,
            not_found_limit: 3,
            retention: None,
            claim_at_finish: false,
        }
    }
}

impl JournalOptions {
    /// Refuses a setting out of its range, naming it.
    pub(crate) fn check(&self) -> Result<()> {
        const DAY: Duration = Duration::from_secs(24 * 3600);
        let invalid = |field: &str, problem: &str| Err(Error::field(ErrorKind::InvalidArgument, field, problem));
        if self.lease < Duration::from_millis(1) || self.lease > DAY {
            return invalid("lease", "must be between 1 ms and 24 hours");
        }
        if self.busy_wait > DAY {
            return invalid("busy_wait", "must be at most 24 hours");
        }
        if self.lock_timeout > DAY {
            return invalid("lock_timeout", "must be at most 24 hours");
        }
        if self.command_timeout.is_some_and(|t| t < Duration::from_millis(1) || t > DAY) {
            return invalid("command_timeout", "must be between 1 ms and 24 hours");
        }
        if self.first_index.is_some_and(|first| first < 0) {
            return invalid("first_index", "must be a non-negative index");
        }
        if self.max_reply_bytes == 0 {
            return invalid("max_reply_bytes", "must be at least 1");
        }
        if self.max_index_jump < 1 {
            return invalid("max_index_jump", "must be at least 1");
        }
        if self.not_found_limit == 0 {
            return invalid("not_found_limit", "must be at least 1");
        }
        if let Some(retention) = self.retention {
            if retention < DAY || retention.as_millis() >= i64::MAX as u128 {
                return invalid("retention", "must be at least 1 day (24 hours)");
            }
        }
        Ok(())
    }

    /// How long a PostgreSQL round trip waits, when the URL does not say (`command_timeout`).
    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout.unwrap_or(self.lock_timeout + Duration::from_secs(10))
    }

    /// The lease in milliseconds (at most a day, so it fits).
    pub(crate) fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }
}

/// What `begin` answers.
#[derive(Debug)]
pub enum Begin {
    /// The delivery is this worker's to handle: run the partner's logic, then `finish` the claim
    /// with the reply (or `abandon` it). `claim.attempt()` is 1 the first time.
    New(Claim),
    /// The delivery was handled before: send this reply, byte for byte, and run nothing.
    Done(Vec<u8>),
    /// Another worker holds a live claim on it and did not finish within `busy_wait`: answer so
    /// that the service delivers again later (HTTP 503 with `Retry-After`).
    Busy,
    /// The key came before with other content: refuse this delivery (HTTP 409 carrying the
    /// error, `ErrorKind::Conflict`, which names the `transactionId`); the first stays.
    Conflict(Error),
    /// Not answered from the journal (a balance query, which must be current; an unknown event
    /// without an index): run the logic and send its reply; there is nothing to finish. Its
    /// index, if any, was recorded.
    NotReplayable,
}

/// What [`Journal::finish_optimistic`] did.
#[derive(Debug)]
pub enum Finished {
    /// The reply was stored with the staged statements, in one transaction: send it.
    Stored,
    /// The journal held the key already: none of the staged statements took effect, and the
    /// delivery is answered as [`Journal::begin`] answers it now: `Done(reply)` (send the stored
    /// reply, byte for byte), `Conflict` (409), `Busy` (503), or `New(claim)`: a claim `begin`
    /// took over (an abandoned delivery, an expired claim) whose logic must run again knowing
    /// it (`Claim::reply_pruned`, `Claim::differing`), finished as after `begin`.
    Answered(Begin),
}

/// Counts and gap figures of a journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// Deliveries handled: finished with a stored reply.
    pub handled: u64,
    /// Deliveries answered from the journal with a stored reply.
    pub replayed: u64,
    /// Deliveries whose key came before with other decisive content (refused, or handed out
    /// as new because the first was never finished), every one counted.
    pub conflicts: u64,
    /// Deliveries refused by validation whose body named an event and whose index could be read
    /// (`record_refused`).
    pub refused: u64,
    /// Deliveries claimed and neither finished nor abandoned (including claims whose worker died
    /// and whose lease ran out, until the next delivery takes them over).
    pub in_progress: u64,
    /// Indexes between the first index and the highest seen that were never seen, leaving out
    /// the stretches of index jumps; unrecoverable ones included.
    pub missing: u64,
    /// Deliveries claimed and never finished: abandoned, or claimed with their lease run out.
    /// Nothing was stored for them; the service or a recovery must deliver them again.
    pub unfinished: u64,
    /// Conflicts (entries of `Journal::conflicts`) no operator resolved yet.
    pub open_conflicts: u64,
    /// Index jumps and reused indexes no operator decided yet.
    pub index_jumps: u64,
    /// Indexes of the current numbering closed by hand (`Journal::resolve`).
    pub resolved: u64,
    /// Missing indexes the service answered 404 for `not_found_limit` runs: no longer fetched.
    pub unrecoverable: u64,
    /// The current numbering: 1 until `Journal::renumber`.
    pub numbering: i64,
    /// The index gap detection counts from (configured, else the lowest seen).
    pub first_index: Option<i64>,
    /// Whether `first_index` is configured (stored in the journal), not just the lowest seen:
    /// then indexes below the lowest seen count missing. While not, recovery asks the service
    /// below the lowest seen on every run (`slotpartner recover --probe`).
    pub first_index_stored: bool,
    /// The index after the highest seen that the service last said it had no event for (recovery's
    /// probe of the tail), and when on the journal's clock (ms since the Unix epoch).
    pub tail_checked: Option<(i64, i64)>,
    /// The highest index seen.
    pub highest_index: Option<i64>,
    /// Every index from the first up to this one was seen; `None` when the first one was not.
    pub watermark: Option<i64>,
    /// Deliveries compacted by `prune` since the journal was created (a counter).
    pub pruned: u64,
    /// Compact records removed by `prune` (`forget_older_than`) since the journal was created.
    pub forgotten: u64,
    /// The bytes the journal takes: on SQLite the file and its write-ahead log, on PostgreSQL
    /// its tables with their indexes and TOAST (`pg_total_relation_size`). `None` when unknown.
    pub size_bytes: Option<u64>,
    /// When the oldest delivery kept whole (its reply stored) was finished, in ms since the Unix
    /// epoch on the journal's clock: what the next `prune` compacts first. `None` when none.
    pub oldest_record_ms: Option<i64>,
    /// When a new index was last seen (any delivery carrying an index the journal had not seen:
    /// an event, a balance query, a refused body; not a repeat): a busy casino that sees none for
    /// long has a broken route. On PostgreSQL, when it was merged into the runs, within a batch
    /// of its arrival. `None` when none was seen since the journal's schema version 3.
    pub last_delivery_ms: Option<i64>,
    /// When the oldest missing index was found missing (an index above it was first seen; on
    /// PostgreSQL, merged into the runs, within a batch of its arrival); `None` when nothing is
    /// missing. For a journal migrated from schema version 2, the migration's time at the
    /// earliest.
    pub oldest_gap_ms: Option<i64>,
}

/// What the journal holds for a delivery (or a refused one), for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The delivery's key; `refused:<index>` for a delivery refused by validation.
    pub key: String,
    pub name: Option<String>,
    /// The index of the first delivery of this key (the refused delivery's index).
    pub index: Option<i64>,
    pub transaction_id: Option<i64>,
    pub state: RecordState,
    /// How many times the delivery was claimed (0 for a refused one).
    pub attempts: i64,
    /// Milliseconds since the Unix epoch (on PostgreSQL, the server's clock).
    pub created_ms: i64,
    pub updated_ms: i64,
    /// When the current claim's lease ends (`Claimed` only).
    pub lease_until_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    /// The stored reply (`Done` only).
    pub reply: Option<Vec<u8>>,
}

/// The outcome of one look at a key inside one transaction.
pub(crate) enum Step {
    Answer(Begin),
    /// Another worker holds a live claim.
    Held,
}

/// Work on the journal's bookkeeping beside the deliveries (see `admin.rs`).
pub(crate) type AdminWork<'a> = &'a mut dyn FnMut(&mut dyn Sql) -> Result<()>;

/// What a transaction of `Store::admin` may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    /// Write, a renumbering (`Journal::renumber`): first waits for every `finish` of a claim at
    /// finish in flight (`JournalOptions::claim_at_finish`) and holds new ones until it commits,
    /// so that none stores a delivery of the old numbering into the new one.
    Renumber,
}

/// What a backend does, each call in its own transaction.
pub(crate) trait Store: Send + Sync {
    /// Whether a fork must wait until no thread is inside a call of this store (SQLite: its
    /// per-file state must not be copied mid-call); otherwise only its pool's lock is guarded
    /// (PostgreSQL: a thread waiting on the server holds nothing a child could inherit).
    fn quiet_for_fork(&self) -> bool;
    /// Runs `work` in one transaction (a writing one unless `access` is `Read`), after the seen
    /// indexes are current (PostgreSQL merges its pending ones first).
    fn admin(&self, access: Access, work: AdminWork<'_>, options: &JournalOptions) -> Result<()>;
    /// Claims `delivery` under `key`, recording its index when `first_look`.
    fn claim(&self, delivery: &Delivery, key: &str, first_look: bool, options: &JournalOptions) -> Result<Step>;
    /// Whether the journal holds a row for `key` (any state), and its current numbering, read
    /// without writing.
    fn holds(&self, key: &str, options: &JournalOptions) -> Result<(bool, i64)>;
    /// The numbering `Journal::begin_optimistic` hands claims out in without reading the
    /// journal: the one a `holds` of this process read last, 0 when none is known (at first,
    /// and after a finish found the key stored or the numbering changed). Shared by every
    /// handle of the store in the process.
    fn numbering_hint(&self) -> &std::sync::atomic::AtomicI64;
    /// Records the index of a delivery that is not claimed.
    fn record_seen(&self, index: i64, options: &JournalOptions) -> Result<()>;
    fn finish(&self, claim: &Claim, reply: &[u8], staged: &[Staged], options: &JournalOptions) -> Result<()>;
    fn abandon(&self, claim: &Claim, options: &JournalOptions) -> Result<()>;
    fn record_refused(
        &self,
        index: i64,
        name: Option<&str>,
        transaction_id: Option<i64>,
        options: &JournalOptions,
    ) -> Result<()>;
    /// The counters: handled, replayed, conflicts, refused, in progress.
    fn counters(&self, options: &JournalOptions) -> Result<[i64; 5]>;
    /// The bytes the journal takes (see `Status::size_bytes`).
    fn size_bytes(&self, options: &JournalOptions) -> Result<Option<u64>>;
    /// Gives back to the file system a step's worth of the pages `prune` freed (SQLite journals
    /// with incremental vacuum; nothing otherwise), in one short write transaction: the bytes
    /// given back, and whether free pages are left for another step.
    fn reclaim_step(&self, options: &JournalOptions) -> Result<(u64, bool)>;
    fn lookup(&self, transaction_id: i64, options: &JournalOptions) -> Result<Vec<Record>>;
    /// Copies the journal into the new file `dest` while others write (see `Journal::backup`).
    fn backup(&self, dest: &std::path::Path, options: &JournalOptions) -> Result<BackupReport>;
}

/// What [`Journal::open_existing`] found at a URL.
#[derive(Debug)]
pub enum ExistingJournal {
    /// A journal of this release's schema version, opened.
    Current(Journal),
    /// A journal of an older schema version (1 or 2), left as it is: [`Journal::open`] would
    /// migrate it to [`SCHEMA_VERSION`].
    Older { version: i64 },
    /// No journal there, and nothing was created: why, naming the URL without its password
    /// (`sqlite:/var/lib/j.db: an empty file, no sp_journal_meta`).
    Absent { reason: String },
}

/// How a store prepares its storage when it is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prepare {
    /// Creates the tables if absent, migrates an older schema (`Journal::open`).
    CreateOrMigrate,
    /// Neither: reports what it found (`Journal::open_existing`).
    Existing,
}

/// What a store found when it was opened with `Prepare::Existing` (always `Current` with
/// `Prepare::CreateOrMigrate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    Current,
    Older(i64),
    Absent(String),
}

/// A delivery journal. `Send + Sync`: share one across threads (`Arc`), or open the same URL in
/// each; either way, connections are pooled per process and URL and kept across calls.
pub struct Journal {
    store: Arc<dyn Store>,
    options: JournalOptions,
    /// When `finish` last ran a batch of the retention (`JournalOptions::retention`), in ms on
    /// this process's monotonic clock since the journal was opened.
    retention_ran_ms: std::sync::atomic::AtomicU64,
    opened: Instant,
}

const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Journal>();
    send_sync::<Claim>();
    send_sync::<Delivery>();
};

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("options", &self.options).finish_non_exhaustive()
    }
}

impl Journal {
    /// Opens the journal at `url`, creating its tables the first time:
    ///
    /// - `sqlite:PATH` (also `sqlite://PATH`): a SQLite file in WAL mode, created if absent;
    ///   every process and thread of the host may share it.
    /// - `postgres://...` or `postgresql://...`: a PostgreSQL database (libpq's URL form), for
    ///   workers on several hosts. `sslmode` (`disable`, `prefer` (the default), `require`,
    ///   `verify-ca`, `verify-full`) and `sslrootcert` (a PEM file, or `system`) as libpq reads
    ///   them, over rustls; without `sslrootcert`, `verify-full` trusts the system's roots.
    ///
    /// Errors: `InvalidArgument` (field `journal_url`, or an option's name) for an unusable URL
    /// or option; `Journal` when the storage cannot be used (unreachable server, read-only or
    /// corrupt file, a journal of a newer schema version).
    pub fn open(url: &str, options: &JournalOptions) -> Result<Journal> {
        match Journal::open_as(url, options, Prepare::CreateOrMigrate)? {
            ExistingJournal::Current(journal) => Ok(journal),
            // Created or migrated: never found absent or older.
            ExistingJournal::Older { version } => Err(Error::new(
                ErrorKind::Journal,
                format!("journal_url: the journal stayed at schema version {version}"),
            )),
            ExistingJournal::Absent { reason } => Err(Error::new(ErrorKind::Journal, reason)),
        }
    }

    /// Opens the journal at `url` only when one of this release's schema version is there,
    /// creating and migrating nothing: what an inspection that must leave the storage as it found
    /// it opens (`slotpartner check`). A missing or empty SQLite file, or a database without
    /// `sp_journal_meta`, is [`ExistingJournal::Absent`] (read with a read-only connection, so
    /// that nothing is written to it, not even SQLite's header); a journal of an older version
    /// is [`ExistingJournal::Older`] and stays as it is ([`Journal::open`] would migrate it, and
    /// endpoints of the older release would then refuse it). A current journal opens as with
    /// `open` (a configured `first_index` is stored as `open` stores it).
    ///
    /// Errors as `open`'s: an unusable URL or option, unreachable storage, another program's
    /// SQLite database, a journal of a newer schema version.
    pub fn open_existing(url: &str, options: &JournalOptions) -> Result<ExistingJournal> {
        Journal::open_as(url, options, Prepare::Existing)
    }

    fn open_as(url: &str, options: &JournalOptions, prepare: Prepare) -> Result<ExistingJournal> {
        options.check()?;
        fork_guard::install(options.lock_timeout)?;
        let _inside = fork_guard::enter()?;
        let (store, found): (Arc<dyn Store>, Found) = if let Some(path) = url.strip_prefix("sqlite:") {
            let (store, found) = sqlite::Sqlite::open(path, options, prepare)?;
            (store, found)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let (store, found) = postgres::Postgres::open(url, options, prepare)?;
            (store, found)
        } else {
            let problem = match url.split_once(':') {
                Some((scheme, _)) if !scheme.is_empty() && scheme.len() <= 32 => {
                    format!("scheme {scheme:?} is not a journal")
                }
                // What follows the colon is not shown: it may hold a password.
                Some(_) => "has no scheme before its first \":\"".to_owned(),
                None if url.is_empty() => "is empty".to_owned(),
                // Shown up to a character that may start a secret (`user@`, `?password=`).
                None => {
                    let shown = url.split(['@', '?', '#', ';', '&', '=']).next().unwrap_or_default();
                    let cut = if shown.len() < url.len() { "..." } else { "" };
                    format!("{}{cut} has no scheme", quoted(&excerpt_of(shown, 60)))
                }
            };
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "journal_url",
                format!("{problem}: expected sqlite:PATH or postgres://USER@HOST/DATABASE"),
            ));
        };
        Ok(match found {
            Found::Current => ExistingJournal::Current(Journal {
                store,
                options: options.clone(),
                retention_ran_ms: std::sync::atomic::AtomicU64::new(0),
                opened: Instant::now(),
            }),
            Found::Older(version) => ExistingJournal::Older { version },
            Found::Absent(reason) => ExistingJournal::Absent { reason },
        })
    }

    /// Inside the journal for a call, as far as a fork must wait for it (see `Store::quiet_for_fork`).
    fn pass(&self) -> Result<Option<fork_guard::Inside<'static>>> {
        if self.store.quiet_for_fork() { fork_guard::enter().map(Some) } else { Ok(None) }
    }

    /// The options the journal was opened with.
    pub fn options(&self) -> &JournalOptions {
        &self.options
    }

    /// Claims `delivery`, recording its index. See [`Begin`] for the answers. When another
    /// worker holds a live claim on the key, waits up to `busy_wait` (holding no lock) for it to
    /// finish. With `JournalOptions::claim_at_finish`, a key the journal does not hold is handed
    /// out with nothing written (its index is recorded by `finish` or `abandon`).
    /// Errors: `Journal` when the storage fails.
    pub fn begin(&self, delivery: &Delivery) -> Result<Begin> {
        let Some(key) = delivery.key() else {
            if let Some(index) = delivery.index() {
                let _inside = self.pass()?;
                self.store.record_seen(index, &self.options)?;
            }
            return Ok(Begin::NotReplayable);
        };
        if self.options.claim_at_finish {
            let _inside = self.pass()?;
            let (held, numbering) = self.store.holds(key, &self.options)?;
            self.store.numbering_hint().store(numbering, std::sync::atomic::Ordering::Relaxed);
            if !held {
                return Ok(Begin::New(Claim::unwritten(delivery, key, numbering)?));
            }
        }
        let deadline = Instant::now() + self.options.busy_wait;
        let mut pause = Duration::from_millis(2);
        let mut first_look = true;
        loop {
            // Inside the journal for each look, not while sleeping: a fork waits for no sleeper.
            let inside = self.pass()?;
            if let Step::Answer(answer) = self.store.claim(delivery, key, first_look, &self.options)? {
                return Ok(answer);
            }
            drop(inside);
            first_look = false;
            let now = Instant::now();
            if now >= deadline {
                return Ok(Begin::Busy);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// `begin` for logic that runs optimistically: with `JournalOptions::claim_at_finish`, a
    /// delivery with a key is handed out as `New` with nothing read nor written, and
    /// [`Journal::finish_optimistic`] stores it, or answers it as `begin` would have when the
    /// journal held its key (a repeat gets the stored reply from it): one transaction, one round
    /// trip, a new delivery. For logic whose every effect is staged (`finish_optimistic`'s
    /// `staged`), so that a repeat's run leaves nothing: never when it calls out (a wallet's
    /// API) or writes anything itself before finishing. A delivery without a key is handled as
    /// by `begin`.
    ///
    /// The claim carries the numbering this process last read (the first call of a process
    /// reads it with the key, as `begin` does); a renumbering since, or a journal another
    /// release migrated, makes its finish fail with `ClaimLost` and nothing stored (answer 503:
    /// the next delivery reads the journal again). Errors: `InvalidArgument` (field
    /// `claim_at_finish`) when the option is off; `Journal` when the storage fails.
    pub fn begin_optimistic(&self, delivery: &Delivery) -> Result<Begin> {
        use std::sync::atomic::Ordering;
        if !self.options.claim_at_finish {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "claim_at_finish",
                "begin_optimistic needs claim_at_finish: without it, begin writes the claim before the logic runs",
            ));
        }
        let Some(key) = delivery.key() else { return self.begin(delivery) };
        let hint = self.store.numbering_hint();
        let mut numbering = hint.load(Ordering::Relaxed);
        if numbering == 0 {
            let _inside = self.pass()?;
            let (held, read) = self.store.holds(key, &self.options)?;
            hint.store(read, Ordering::Relaxed);
            if held {
                drop(_inside);
                return self.begin(delivery);
            }
            numbering = read;
        }
        Ok(Begin::New(Claim::unwritten(delivery, key, numbering)?))
    }

    /// `finish_with` for a claim of [`Journal::begin_optimistic`]: stores the delivery with
    /// `reply` and the `staged` statements in one transaction when the journal does not hold its
    /// key (`Finished::Stored`; also when another delivery of the same content stored this very
    /// reply meanwhile). When it does, nothing staged takes effect and `delivery` (the one the
    /// claim was handed out for) is answered as `begin` answers it now (`Finished::Answered`):
    /// the stored reply of a repeat, a conflict recorded and refused, or a claim taken over,
    /// which is finished here with `reply` and `staged` when the logic's run stands (attempt
    /// after an abandoned or expired one, same content, reply not pruned) and else handed back.
    /// When the journal's numbering moved since the claim was handed out, nothing is stored and
    /// the error is `ClaimLost` (the delivery may be of the old numbering; answer 503).
    /// A claim `begin` wrote is finished as `finish_with` finishes it.
    /// Errors: as `finish_with`.
    pub fn finish_optimistic(
        &self,
        claim: &Claim,
        delivery: &Delivery,
        reply: &[u8],
        staged: &[Staged],
    ) -> Result<Finished> {
        use std::sync::atomic::Ordering;
        if claim.unwritten.is_none() {
            return self.finish_with(claim, reply, staged).map(|()| Finished::Stored);
        }
        if delivery.key() != Some(claim.key.as_str()) {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "delivery",
                format!("is not the delivery the claim on {} was handed out for", claim.key),
            ));
        }
        match self.finish_with(claim, reply, staged) {
            Ok(()) => Ok(Finished::Stored),
            Err(e) if e.kind == ErrorKind::ClaimLost => {
                // The key is held (or the numbering moved): read it as `begin` does.
                self.store.numbering_hint().store(0, Ordering::Relaxed);
                match self.begin(delivery)? {
                    // Not held: the numbering moved (or the schema) since the claim was handed
                    // out; the delivery may be of the old numbering, so nothing is stored.
                    Begin::New(taken) if taken.unwritten.is_some() => Err(e),
                    Begin::New(taken) if !taken.reply_pruned() && taken.differing().is_empty() => {
                        let finished = self.finish_with(&taken, reply, staged);
                        if finished.is_err() {
                            // A claim the caller never saw: released for the next delivery.
                            let _ = self.abandon(&taken);
                        }
                        finished.map(|()| Finished::Stored)
                    }
                    answer => Ok(Finished::Answered(answer)),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Stores `reply` for the claimed delivery, once the partner committed its own work; every
    /// later delivery of the key gets it, byte for byte (a `success:false` reply too).
    /// Errors: `InvalidArgument` (field `reply`) for a reply over `max_reply_bytes` (the claim
    /// stays held: finish it with a smaller reply or abandon it); `ClaimLost` when the claim is
    /// no longer this worker's (its lease expired and another delivery took it over): nothing
    /// is stored; `Journal` when the storage fails.
    pub fn finish(&self, claim: &Claim, reply: &[u8]) -> Result<()> {
        self.finish_with(claim, reply, &[])
    }

    /// `finish`, running the partner's `staged` statements (its ledger's credit, say) in the
    /// same transaction, after the claim is confirmed this worker's and before the reply is
    /// committed with it: the credit and the stored reply are made together, with one durable
    /// commit, or not at all (see `Staged`). Exactly once then holds without the ledger's own
    /// unique key: a worker dying before the commit leaves neither, and the next delivery runs
    /// the logic again.
    /// Errors: as `finish`; `Journal` (field `statements[N]`) when a staged statement fails:
    /// nothing was stored, no statement took effect, the claim is still held or, under claim at
    /// finish, was never written (finish again, or abandon it); `Journal` (field `statements`)
    /// when a statement ended the transaction nonetheless (`staged::escaped`); `ClaimLost`: no
    /// staged statement was run.
    pub fn finish_with(&self, claim: &Claim, reply: &[u8], staged: &[Staged]) -> Result<()> {
        if !claim.held_by_this_process() {
            return Err(claim.not_this_process("finish"));
        }
        if reply.len() > self.options.max_reply_bytes {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "reply",
                format!(
                    "{} bytes is more than the journal's limit of {} bytes (max_reply_bytes); nothing was stored and the claim on {} is still held",
                    reply.len(),
                    self.options.max_reply_bytes,
                    claim.key
                ),
            ));
        }
        {
            let _inside = self.pass()?;
            self.store.finish(claim, reply, staged, &self.options).map_err(|mut e| {
                staged::tell_what_stays(&mut e, claim.unwritten.is_none());
                e
            })?;
        }
        self.run_retention();
        Ok(())
    }

    /// One batch of the retention (`JournalOptions::retention`) and a step giving freed pages
    /// back, at most once a second for the whole journal (every process and host), asked at most
    /// once a second per handle, from a second after it was opened (a handle living less, as in
    /// a process per request, never runs it: prune from cron there). A failure is left for the
    /// next batch (and for `prune` run by hand) to meet.
    fn run_retention(&self) {
        use std::sync::atomic::Ordering;
        let Some(retention) = self.options.retention else { return };
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.retention_ran_ms.load(Ordering::Relaxed);
        if now < last.saturating_add(1000)
            || self.retention_ran_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            return;
        }
        let options = PruneOptions::older_than(retention);
        let ran =
            self.write(|sql| if prune::retention_due(sql)? { prune::batch(sql, &options).map(Some) } else { Ok(None) });
        if let Ok(Some(batch)) = ran {
            if batch.compacted + batch.forgotten > 0 {
                if let Ok(_inside) = self.pass() {
                    let _ = self.store.reclaim_step(&self.options);
                }
            }
        }
    }

    /// Releases the claim after a transient failure of the partner (its database is down), so
    /// that the next delivery runs the logic again (as attempt + 1). Answer the service with
    /// HTTP 503 so that it delivers again. Errors: `ClaimLost`, `Journal` as for `finish`.
    pub fn abandon(&self, claim: &Claim) -> Result<()> {
        if !claim.held_by_this_process() {
            return Err(claim.not_this_process("abandon"));
        }
        let _inside = self.pass()?;
        self.store.abandon(claim, &self.options)
    }

    /// Records a delivery refused by validation whose index could be read: its index counts as
    /// seen (not missing), and it is counted as refused. `name` and `transaction_id` as far as
    /// the body let them be read.
    pub fn record_refused(&self, index: i64, name: Option<&str>, transaction_id: Option<i64>) -> Result<()> {
        if index < 0 {
            return Err(Error::field(ErrorKind::InvalidArgument, "index", "must be a non-negative index"));
        }
        let _inside = self.pass()?;
        self.store.record_refused(index, name, transaction_id, &self.options)
    }

    /// The indexes never seen between the first index and the highest seen, as inclusive ranges
    /// in order, at most `limit` of them. Costs in proportion to `limit`, not to the deliveries.
    pub fn missing(&self, limit: usize) -> Result<Vec<(i64, i64)>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.read(|sql| admin::missing(sql, limit))
    }

    /// The indexes of deliveries claimed and never finished, in order, at most `limit`: abandoned
    /// ones, and claimed ones whose lease ran out (their worker died). Their index counts as
    /// seen, yet nothing was stored: a delivered one comes again from the service (it was
    /// answered 503, or not at all), but a recovered one only through another recovery, which
    /// therefore fetches these too.
    pub fn unfinished(&self, limit: usize) -> Result<Vec<i64>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.read(|sql| admin::unfinished(sql, limit))
    }

    /// Now on the journal's wall clock, in ms since the Unix epoch: the PostgreSQL server's
    /// (`clock_timestamp()`), the clock its stored times are read by; this host's on SQLite.
    /// For comparing clocks (`slotpartner check`); leases never go by it.
    pub fn clock_ms(&self) -> Result<i64> {
        self.read(|sql| sql.now_ms())
    }

    /// Counts and gap figures.
    pub fn status(&self) -> Result<Status> {
        let _inside = self.pass()?;
        let [handled, replayed, conflicts, refused, in_progress] = self.store.counters(&self.options)?;
        let not_found_limit = self.options.not_found_limit;
        let (summary, extras, vitals) =
            self.read(|sql| Ok((admin::summary(sql)?, admin::extras(sql, not_found_limit)?, admin::vitals(sql)?)))?;
        let size_bytes = self.store.size_bytes(&self.options)?;
        Ok(Status {
            handled: count(handled),
            replayed: count(replayed),
            conflicts: count(conflicts),
            refused: count(refused),
            in_progress: count(in_progress),
            missing: summary.missing,
            first_index: summary.first,
            highest_index: summary.highest,
            watermark: summary.watermark,
            unfinished: extras.unfinished,
            open_conflicts: extras.open_conflicts,
            index_jumps: extras.open_jumps,
            resolved: extras.resolved,
            unrecoverable: extras.unrecoverable,
            numbering: extras.numbering,
            pruned: vitals.pruned,
            forgotten: vitals.forgotten,
            size_bytes,
            oldest_record_ms: vitals.oldest_record_ms,
            last_delivery_ms: vitals.last_delivery_ms,
            oldest_gap_ms: vitals.oldest_gap_ms,
            first_index_stored: vitals.first_index_stored,
            tail_checked: vitals.tail_checked,
        })
    }

    /// Notes that the service has no event at `index`, the one after the highest seen (see
    /// `Status::tail_checked`): recovery's probe of the tail found nothing lost there.
    pub fn note_tail_checked(&self, index: i64) -> Result<()> {
        self.write(|sql| admin::note_tail_checked(sql, index))
    }

    /// Removes what the service can no longer resend (see `PruneOptions`), in batches of
    /// `options.batch` rows, each its own transaction, `options.pause` apart; then gives the
    /// freed pages of a SQLite journal back to the file system (journals created by this
    /// release; in older ones SQLite reuses them for new deliveries). Safe while workers write:
    /// a delivery waits for at most one batch (`PruneReport::longest_batch`). Errors:
    /// `InvalidArgument` naming the option, `Journal` when the storage fails (what earlier
    /// batches removed stays removed).
    pub fn prune(&self, options: &PruneOptions) -> Result<PruneReport> {
        options.check()?;
        let started = Instant::now();
        let deadline = options.max_time.map(|max| started + max);
        let mut report = PruneReport::default();
        loop {
            let batch_started = Instant::now();
            let batch = self.write(|sql| prune::batch(sql, options))?;
            report.longest_batch = report.longest_batch.max(batch_started.elapsed());
            report.batches += 1;
            report.compacted += batch.compacted;
            report.forgotten += batch.forgotten;
            report.refused_removed += batch.refused_removed;
            report.conflicts_removed += batch.conflicts_removed;
            if let Some(export) = batch.export_running {
                report.export_running = true;
                report.stopped_by = Some(format!("an export is running ({export}); run prune again once it is done"));
                break;
            }
            if batch.is_empty() {
                report.complete = true;
                break;
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                report.stopped_by = Some("max_time".to_owned());
                break;
            }
            std::thread::sleep(options.pause);
        }
        loop {
            let (bytes, more) = {
                let _inside = self.pass()?;
                self.store.reclaim_step(&self.options)?
            };
            report.bytes_returned += bytes;
            if !more || deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                break;
            }
            std::thread::sleep(options.pause);
        }
        Ok(report)
    }

    /// The missing ranges found missing at least `min_age` ago (an index above them was first
    /// seen that long ago), in order, at most `limit`: a younger gap is usually an event still on
    /// its way (reordering, the service's own retry). With `min_age` zero, `missing(limit)`.
    pub fn missing_older_than(&self, min_age: Duration, limit: usize) -> Result<Vec<(i64, i64)>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let age_ms = i64::try_from(min_age.as_millis()).unwrap_or(i64::MAX);
        self.read(|sql| admin::missing_older_than(sql, age_ms, limit))
    }

    /// Whether an operator must look: indexes missing, deliveries unfinished, conflicts or index
    /// jumps open. What `journal gaps` and `recover` exit 1 on.
    pub fn needs_attention(status: &Status) -> bool {
        status.missing > 0 || status.unfinished > 0 || status.open_conflicts > 0 || status.index_jumps > 0
    }

    /// The index jumps, reused indexes and renumberings, newest first, at most `limit`; decided
    /// ones too when `all`.
    pub fn index_jumps(&self, all: bool, limit: usize) -> Result<Vec<IndexJump>> {
        self.read(|sql| admin::index_jumps(sql, all, limit))
    }

    /// Accepts an open index jump or reused index (entry `id` of `index_jumps`): the numbering
    /// really moved, a jump's stretch is no events. `note` (required) is kept for audit.
    /// Errors: `InvalidArgument` (field `id`, `note`).
    pub fn accept_jump(&self, id: i64, note: &str) -> Result<()> {
        self.write(|sql| admin::decide_jump(sql, id, true, note))
    }

    /// Declares an open index jump a gap: the stretch between the highest index before it and
    /// the jump counts as missing again, for recovery to fetch (a real outage longer than
    /// `max_index_jump`). `note` is kept for audit.
    pub fn jump_is_gap(&self, id: i64, note: &str) -> Result<()> {
        self.write(|sql| admin::decide_jump(sql, id, false, note))
    }

    /// Closes the missing indexes `first..=last` by hand (events the service confirms do not
    /// exist, or that were settled another way): they no longer count as missing and recovery no
    /// longer fetches them. `note` (required) is kept for audit with the range. The number of
    /// indexes that were missing. Errors: `InvalidArgument` (field `range`, `note`).
    pub fn resolve(&self, first: i64, last: i64, note: &str) -> Result<u64> {
        self.write(|sql| admin::resolve(sql, first, last, note))
    }

    /// The ranges resolved by hand, newest first, at most `limit`.
    pub fn resolutions(&self, limit: usize) -> Result<Vec<Resolution>> {
        self.read(|sql| admin::resolutions(sql, limit))
    }

    /// The conflicts, newest first, at most `limit`; resolved ones too when `all`.
    pub fn conflicts(&self, all: bool, limit: usize) -> Result<Vec<ConflictRecord>> {
        self.read(|sql| admin::conflicts(sql, all, limit))
    }

    /// Marks the open conflict `id` resolved, with `note` kept for audit.
    pub fn resolve_conflict(&self, id: i64, note: &str) -> Result<()> {
        self.write(|sql| admin::resolve_conflict(sql, id, note))
    }

    /// Starts a new numbering from `first` after the service restarted its indexes: the seen
    /// indexes of the old numbering are archived, gap detection counts from `first` afresh, and
    /// every record and stored reply stays (events keyed by index keep theirs under a key of the
    /// old numbering, so the new numbering's events never meet them). Open index jumps of the
    /// old numbering are settled. Returns the new numbering. A `first_index` option given to
    /// `open` is stored only while the numbering is 1. Refused (`InvalidArgument`, field
    /// `first_index`, naming the ranges) while indexes of the current numbering are missing:
    /// recover or resolve them first, or give them up with [`Journal::renumber_giving_up_gaps`].
    pub fn renumber(&self, first: i64, note: &str) -> Result<i64> {
        self.run(Access::Renumber, &mut |sql| admin::renumber(sql, first, note, false))
    }

    /// [`Journal::renumber`], giving up the missing indexes of the current numbering: each
    /// range is recorded as resolved by hand (see [`Journal::resolutions`]) with the note
    /// "given up by renumbering from FIRST: NOTE", in the same transaction, so that what was
    /// dropped stays on record for audit.
    pub fn renumber_giving_up_gaps(&self, first: i64, note: &str) -> Result<i64> {
        self.run(Access::Renumber, &mut |sql| admin::renumber(sql, first, note, true))
    }

    /// Closes the unfinished deliveries at `index` by hand, with `note` kept for audit (an
    /// event the service answers 404 for, settled another way, or an index of an earlier
    /// numbering): no longer counted unfinished nor fetched; a later delivery of the key still
    /// runs as its next attempt. The number closed. Errors: `InvalidArgument` (field `index`
    /// when no unfinished delivery carries it, `note`).
    pub fn close_unfinished(&self, index: i64, note: &str) -> Result<u64> {
        self.write(|sql| admin::close_unfinished(sql, index, note))
    }

    /// Indexes recovery no longer fetches (404 for `not_found_limit` runs), still missing or
    /// carrying an unfinished delivery, at most `limit`.
    pub fn unrecoverable(&self, limit: usize) -> Result<Vec<i64>> {
        let not_found_limit = self.options.not_found_limit;
        self.read(|sql| admin::unrecoverable(sql, not_found_limit, limit))
    }

    /// What a recovery run fetches, at most `limit`: unfinished deliveries, then missing indexes
    /// never tried, then those tried before, least recently tried first; never unrecoverable ones.
    pub fn recovery_plan(&self, limit: usize) -> Result<Vec<i64>> {
        self.recovery_plan_older_than(limit, Duration::ZERO)
    }

    /// `recovery_plan`, of what is at least `min_age` old on the journal's clock: the indexes of
    /// gaps found missing at least `min_age` ago (as `missing_older_than` lists them), and the
    /// unfinished deliveries last claimed or abandoned at least `min_age` ago. Younger ones are
    /// usually still on their way (reordering, the service's own retry after a 503) and are left
    /// for a later run. With `min_age` zero, `recovery_plan(limit)`.
    pub fn recovery_plan_older_than(&self, limit: usize, min_age: Duration) -> Result<Vec<i64>> {
        let not_found_limit = self.options.not_found_limit;
        let min_age_ms = i64::try_from(min_age.as_millis()).unwrap_or(i64::MAX);
        self.write(|sql| admin::recovery_plan(sql, limit, not_found_limit, min_age_ms))
    }

    /// Notes what a recovery got for `index` (it orders the next runs' work, and counts 404s).
    pub fn note_fetch(&self, index: i64, outcome: FetchOutcome) -> Result<()> {
        self.write(|sql| admin::note_fetch(sql, index, outcome))
    }

    /// The keys, states and `transactionId`s of deliveries that carried `index`.
    pub fn deliveries_at(&self, index: i64) -> Result<Vec<(String, String, Option<i64>)>> {
        self.read(|sql| admin::deliveries_at(sql, index))
    }

    /// Takes the named lock for `holder` (or renews it) for `lease`; `Busy` naming who holds it
    /// and since when when another holder's lease has not run out. Held in the journal, so it
    /// works across processes and hosts, and a holder that died loses it when its lease ends,
    /// or at once when its holder text (`holder_text`) names a process of this host, boot and PID
    /// namespace that is gone.
    pub fn take_lock(&self, name: &str, holder: &str, lease: Duration) -> Result<()> {
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        let mut held = None;
        self.write(|sql| {
            held = admin::take_lock(sql, name, holder, lease_ms)?.err();
            Ok(())
        })?;
        match held {
            None => Ok(()),
            Some(held) => Err(Error::field(
                ErrorKind::Busy,
                "lock",
                format!(
                    "{name} is held by {} since {} (until {} unless renewed)",
                    held.holder,
                    rfc3339_ms(held.since_ms),
                    rfc3339_ms(held.until_ms)
                ),
            )),
        }
    }

    /// Releases the named lock if `holder` holds it.
    pub fn release_lock(&self, name: &str, holder: &str) -> Result<()> {
        self.write(|sql| admin::release_lock(sql, name, holder))
    }

    fn read<T>(&self, mut work: impl FnMut(&mut dyn Sql) -> Result<T>) -> Result<T> {
        self.run(Access::Read, &mut work)
    }

    fn write<T>(&self, mut work: impl FnMut(&mut dyn Sql) -> Result<T>) -> Result<T> {
        self.run(Access::Write, &mut work)
    }

    fn run<T>(&self, access: Access, work: &mut dyn FnMut(&mut dyn Sql) -> Result<T>) -> Result<T> {
        let _inside = self.pass()?;
        let mut out = None;
        self.store.admin(
            access,
            &mut |sql| {
                out = Some(work(sql)?);
                Ok(())
            },
            &self.options,
        )?;
        out.ok_or_else(|| Error::new(ErrorKind::Journal, "journal: the transaction gave no answer"))
    }

    /// Everything the journal holds for `transaction_id`: its deliveries (a refund and a payout
    /// may share an id) and refused deliveries that carried it.
    pub fn lookup(&self, transaction_id: i64) -> Result<Vec<Record>> {
        let _inside = self.pass()?;
        self.store.lookup(transaction_id, &self.options)
    }

    /// Every delivery the journal holds whose first delivery (`created_ms`) lies in
    /// `since_ms..until_ms` (ms since the Unix epoch, `until_ms` left out), for reconciliation,
    /// handed to `each` one at a time in the journal's order (a row is lent for the call); the
    /// number of rows. Finished deliveries, compact records and unfinished ones alike (see
    /// [`ExportRow`]). The journal is read 1,000 rows at a time, each page in its own short read
    /// transaction: memory stays constant, and no writer waits for the export (see `export.rs`).
    /// The export holds the journal's lock `export` meanwhile (retention waits for it; it lapses
    /// by itself 15 minutes after its process died), so one export runs at a time. An error
    /// `each` returns stops the export and is returned. Errors: `InvalidArgument` (field
    /// `until_ms`) when `until_ms` is not after `since_ms`; `Busy` (field `lock`) naming the
    /// export running; `Journal` when the storage fails, or when `each` held the export up
    /// longer than the lock's lease.
    pub fn export(&self, since_ms: i64, until_ms: i64, each: &mut dyn FnMut(&ExportRow) -> Result<()>) -> Result<u64> {
        export::check_period(since_ms, until_ms)?;
        let mut lock = export::ExportLock::take(self)?;
        let (mut after, mut rows) = (i64::MIN, 0u64);
        while let Some((last, page)) = self.read(|sql| export::page(sql, after, since_ms, until_ms))? {
            for row in &page {
                each(row)?;
                rows += 1;
            }
            after = last;
            lock.keep()?;
        }
        Ok(rows)
    }

    /// The lowest and highest [`ExportRow::id`] of the journal (`None` when it holds no
    /// delivery): what `export` goes through, for a progress bar. Two lookups of the primary
    /// key; the rows of a period are not counted ahead, which would read the journal twice.
    pub fn export_extent(&self) -> Result<Option<(i64, i64)>> {
        self.read(export::extent)
    }

    /// `export` written in `format` to a new file at `path` (created 0600, as it names players),
    /// through a temporary file beside it that takes the name `path` only once complete and
    /// flushed: there is never a half export at `path`, and an existing file is never replaced.
    /// `progress` sees each row once written. The number of rows. Errors: `InvalidArgument` with
    /// field `path` when `path` exists or names no file, or the file cannot be created or
    /// written (the message says which and why), field `until_ms` as for `export`; `Journal`.
    pub fn export_to_file(
        &self,
        since_ms: i64,
        until_ms: i64,
        format: ExportFormat,
        path: &std::path::Path,
        progress: &mut dyn FnMut(&ExportRow),
    ) -> Result<u64> {
        export_format::to_file(self, since_ms, until_ms, format, path, progress)
    }

    /// Copies a SQLite journal into the new file `dest` while workers go on writing, with
    /// SQLite's online backup API: the copy holds every delivery committed when the backup
    /// started (one snapshot; nothing written later), is written beside `dest` (created 0600)
    /// and takes the name `dest` only once complete, so there is never a half backup at `dest`.
    /// The copy is a journal of its own: `Journal::open("sqlite:<dest>")` opens it. Writers are
    /// never held up (in WAL mode a reader blocks no writer); the copy goes a few megabytes at a
    /// time with short pauses (see `backup.rs`). `dest` is the caller's; the report is plain
    /// values.
    ///
    /// The whole copy is one call inside the journal: a `fork` of this process waits for it (at
    /// most its bound, after which the child may not use the journal), so take backups from a
    /// process that does not fork meanwhile, such as `slotpartner journal backup`.
    ///
    /// Errors: `InvalidArgument` with field `dest` when `dest` exists (a backup never replaces a
    /// file), names no file or cannot be created; with field `journal_url` for a PostgreSQL
    /// journal (the message gives the `pg_dump` command: PostgreSQL has its own tools);
    /// `Journal` when reading the journal or writing the copy fails (nothing is left at `dest`).
    pub fn backup(&self, dest: &std::path::Path) -> Result<BackupReport> {
        let _inside = self.pass()?;
        self.store.backup(dest, &self.options)
    }
}

/// Milliseconds since the Unix epoch on this host's wall clock (shifted on this thread by
/// `shift_wall_clock_for_tests`): the clock the times kept for people are read against (the
/// journal's own, never a lease's), as [`rfc3339_ms`] writes them.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX).saturating_add(WALL_CLOCK_SHIFT_MS.with(std::cell::Cell::get))
}

thread_local! {
    static WALL_CLOCK_SHIFT_MS: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// For tests only: from now on, the journal reads the wall clock on the calling thread
/// `offset_ms` milliseconds off (0 puts it right again), as a process on a host whose clock was
/// stepped (NTP, a resumed virtual machine) would. Leases never go by the wall clock, so no
/// claim's or lock's fate may change with it; the times kept for people (`created_ms`,
/// `updated_ms`, `finished_ms`, a lock's `since_ms`) move with it. Other threads are untouched.
#[doc(hidden)]
pub fn shift_wall_clock_for_tests(offset_ms: i64) {
    WALL_CLOCK_SHIFT_MS.with(|shift| shift.set(offset_ms));
}

/// A non-negative count read from the journal.
pub(crate) fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
