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

mod admin;
mod claims;
pub(crate) mod fork_guard;
mod gaps;
mod key;
mod lock;
mod pool;
mod postgres;
pub mod recovery;
mod schema;
mod sql;
mod sqlite;
mod time;
mod write_gate;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};

pub use admin::{ConflictRecord, FetchOutcome, IndexJump, JumpKind, LockHolder, Resolution};
pub use claims::{Claim, RecordState};
pub use key::{DECISIVE, Delivery, decisive_differences};
pub use lock::{RECOVERY_LOCK, RecoveryLock, host_name};
pub use time::rfc3339_ms;

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
    /// How far beyond the highest index seen an index may land and still open a gap of its
    /// size. Beyond it the index is recorded as an index jump (see `Journal::index_jumps`): the
    /// stretch between is not counted missing, and the operator sees and decides it. Default
    /// 100,000: more events than a busy service sends between two recovery runs, fewer than a
    /// stray index makes.
    pub max_index_jump: i64,
    /// How many runs of recovery may get HTTP 404 for an index before it is reported
    /// unrecoverable and no longer fetched (it stays missing until resolved by hand). Default 3.
    pub not_found_limit: u32,
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
            max_index_jump: 100_000,
            not_found_limit: 3,
        }
    }
}

impl JournalOptions {
    fn check(&self) -> Result<()> {
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
        Ok(())
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
    /// The highest index seen.
    pub highest_index: Option<i64>,
    /// Every index from the first up to this one was seen; `None` when the first one was not.
    pub watermark: Option<i64>,
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

/// What a backend does, each call in its own transaction.
pub(crate) trait Store: Send + Sync {
    /// Whether a fork must wait until no thread is inside a call of this store (SQLite: its
    /// per-file state must not be copied mid-call); otherwise only its pool's lock is guarded
    /// (PostgreSQL: a thread waiting on the server holds nothing a child could inherit).
    fn quiet_for_fork(&self) -> bool;
    /// Runs `work` in one transaction (a writing one when `write`), after the seen indexes are
    /// current (PostgreSQL merges its pending ones first).
    fn admin(&self, write: bool, work: AdminWork<'_>, options: &JournalOptions) -> Result<()>;
    /// Claims `delivery` under `key`, recording its index when `first_look`.
    fn claim(&self, delivery: &Delivery, key: &str, first_look: bool, options: &JournalOptions) -> Result<Step>;
    /// Records the index of a delivery that is not claimed.
    fn record_seen(&self, index: i64, options: &JournalOptions) -> Result<()>;
    fn finish(&self, claim: &Claim, reply: &[u8], options: &JournalOptions) -> Result<()>;
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
    fn lookup(&self, transaction_id: i64, options: &JournalOptions) -> Result<Vec<Record>>;
}

/// A delivery journal. `Send + Sync`: share one across threads (`Arc`), or open the same URL in
/// each; either way, connections are pooled per process and URL and kept across calls.
pub struct Journal {
    store: Arc<dyn Store>,
    options: JournalOptions,
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
        options.check()?;
        fork_guard::install(options.lock_timeout)?;
        let _inside = fork_guard::enter()?;
        let store: Arc<dyn Store> = if let Some(path) = url.strip_prefix("sqlite:") {
            sqlite::Sqlite::open(path, options)?
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            postgres::Postgres::open(url, options)?
        } else {
            let scheme = match url.split_once(':') {
                Some((scheme, _)) if !scheme.is_empty() && scheme.len() <= 32 => format!("scheme {scheme:?}"),
                _ => "no scheme".to_owned(),
            };
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "journal_url",
                format!("{scheme} is not a journal: expected sqlite:PATH or postgres://USER@HOST/DATABASE"),
            ));
        };
        Ok(Journal { store, options: options.clone() })
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
    /// finish. Errors: `Journal` when the storage fails.
    pub fn begin(&self, delivery: &Delivery) -> Result<Begin> {
        let Some(key) = delivery.key() else {
            if let Some(index) = delivery.index() {
                let _inside = self.pass()?;
                self.store.record_seen(index, &self.options)?;
            }
            return Ok(Begin::NotReplayable);
        };
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

    /// Stores `reply` for the claimed delivery, once the partner committed its own work; every
    /// later delivery of the key gets it, byte for byte (a `success:false` reply too).
    /// Errors: `InvalidArgument` (field `reply`) for a reply over `max_reply_bytes` (the claim
    /// stays held: finish it with a smaller reply or abandon it); `ClaimLost` when the claim is
    /// no longer this worker's (its lease expired and another delivery took it over): nothing
    /// is stored; `Journal` when the storage fails.
    pub fn finish(&self, claim: &Claim, reply: &[u8]) -> Result<()> {
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
        let _inside = self.pass()?;
        self.store.finish(claim, reply, &self.options)
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

    /// Counts and gap figures.
    pub fn status(&self) -> Result<Status> {
        let _inside = self.pass()?;
        let [handled, replayed, conflicts, refused, in_progress] = self.store.counters(&self.options)?;
        let not_found_limit = self.options.not_found_limit;
        let (summary, extras) = self.read(|sql| Ok((admin::summary(sql)?, admin::extras(sql, not_found_limit)?)))?;
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
        })
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
    /// `open` is stored only while the numbering is 1.
    pub fn renumber(&self, first: i64, note: &str) -> Result<i64> {
        self.write(|sql| admin::renumber(sql, first, note))
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
        let not_found_limit = self.options.not_found_limit;
        self.write(|sql| admin::recovery_plan(sql, limit, not_found_limit))
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
    /// works across processes and hosts, and a holder that died loses it when its lease ends.
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
        self.run(false, &mut work)
    }

    fn write<T>(&self, mut work: impl FnMut(&mut dyn Sql) -> Result<T>) -> Result<T> {
        self.run(true, &mut work)
    }

    fn run<T>(&self, write: bool, work: &mut dyn FnMut(&mut dyn Sql) -> Result<T>) -> Result<T> {
        let _inside = self.pass()?;
        let mut out = None;
        self.store.admin(
            write,
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
}

/// Milliseconds since the Unix epoch on this host's wall clock (shifted on this thread by
/// `shift_wall_clock_for_tests`): the times kept for people, never a lease.
pub(crate) fn now_ms() -> i64 {
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
