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

mod claims;
mod gaps;
mod key;
mod pool;
mod postgres;
pub mod recovery;
mod schema;
mod sqlite;
mod write_gate;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};

pub use claims::{Claim, RecordState};
pub use key::Delivery;

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
    /// Deliveries refused because their key came before with other content.
    pub conflicts: u64,
    /// Deliveries refused by validation whose index could be read (`record_refused`).
    pub refused: u64,
    /// Deliveries claimed and neither finished nor abandoned (including claims whose worker died
    /// and whose lease ran out, until the next delivery takes them over).
    pub in_progress: u64,
    /// Indexes between the first index and the highest seen that were never seen.
    pub missing: u64,
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

/// What a backend does, each call in its own transaction.
pub(crate) trait Store: Send + Sync {
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
    fn status(&self, options: &JournalOptions) -> Result<Status>;
    fn missing(&self, limit: usize, options: &JournalOptions) -> Result<Vec<(i64, i64)>>;
    fn unfinished(&self, limit: usize, options: &JournalOptions) -> Result<Vec<i64>>;
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
    ///   workers on several hosts.
    ///
    /// Errors: `InvalidArgument` (field `journal_url`, or an option's name) for an unusable URL
    /// or option; `Journal` when the storage cannot be used (unreachable server, read-only or
    /// corrupt file, a journal of a newer schema version).
    pub fn open(url: &str, options: &JournalOptions) -> Result<Journal> {
        options.check()?;
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
                self.store.record_seen(index, &self.options)?;
            }
            return Ok(Begin::NotReplayable);
        };
        let deadline = Instant::now() + self.options.busy_wait;
        let mut pause = Duration::from_millis(2);
        let mut first_look = true;
        loop {
            if let Step::Answer(answer) = self.store.claim(delivery, key, first_look, &self.options)? {
                return Ok(answer);
            }
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
        self.store.finish(claim, reply, &self.options)
    }

    /// Releases the claim after a transient failure of the partner (its database is down), so
    /// that the next delivery runs the logic again (as attempt + 1). Answer the service with
    /// HTTP 503 so that it delivers again. Errors: `ClaimLost`, `Journal` as for `finish`.
    pub fn abandon(&self, claim: &Claim) -> Result<()> {
        self.store.abandon(claim, &self.options)
    }

    /// Records a delivery refused by validation whose index could be read: its index counts as
    /// seen (not missing), and it is counted as refused. `name` and `transaction_id` as far as
    /// the body let them be read.
    pub fn record_refused(&self, index: i64, name: Option<&str>, transaction_id: Option<i64>) -> Result<()> {
        if index < 0 {
            return Err(Error::field(ErrorKind::InvalidArgument, "index", "must be a non-negative index"));
        }
        self.store.record_refused(index, name, transaction_id, &self.options)
    }

    /// The indexes never seen between the first index and the highest seen, as inclusive ranges
    /// in order, at most `limit` of them. Costs in proportion to `limit`, not to the deliveries.
    pub fn missing(&self, limit: usize) -> Result<Vec<(i64, i64)>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.store.missing(limit, &self.options)
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
        self.store.unfinished(limit, &self.options)
    }

    /// Counts and gap figures.
    pub fn status(&self) -> Result<Status> {
        self.store.status(&self.options)
    }

    /// Everything the journal holds for `transaction_id`: its deliveries (a refund and a payout
    /// may share an id) and refused deliveries that carried it.
    pub fn lookup(&self, transaction_id: i64) -> Result<Vec<Record>> {
        self.store.lookup(transaction_id, &self.options)
    }
}

/// Milliseconds since the Unix epoch on this host's clock.
pub(crate) fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// A non-negative count read from the journal.
pub(crate) fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
