//! The delivery journal: `sp_journal_config_*` to configure it, `sp_journal_open`, then attach it
//! to a receiver (`sp_receiver_config_set_journal`) and claim each event with `sp_event_begin`
//! (in `ffi/event.rs`). `sp_journal_status` and `sp_journal_missing` answer what was seen;
//! `sp_journal_report` lists what waits for an operator, and `sp_journal_resolve`,
//! `sp_journal_accept_jump`, `sp_journal_jump_is_gap`, `sp_journal_resolve_conflict`,
//! `sp_journal_close_unfinished` and `sp_journal_renumber` settle it, each with a note kept for
//! audit.

use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::ffi::args;
use crate::ffi::owned;
use crate::ffi::reply::{self, sp_buffer};
use crate::ffi::status::sp_status;
use crate::journal::{Journal, JournalOptions, Synchronous};

/// A journal's URL and settings, filled in by the `sp_journal_config_set_*` functions. Created by
/// `sp_journal_config_new`, freed by `sp_journal_config_free`. One thread at a time.
pub struct sp_journal_config {
    url: String,
    options: JournalOptions,
}

/// An open delivery journal. Created by `sp_journal_open`, freed by `sp_journal_free`. Any number
/// of threads may use one journal at the same time; receivers it is attached to and events they
/// handed out keep it alive after `sp_journal_free`. Connections are pooled per process and URL.
pub struct sp_journal {
    pub(crate) inner: Arc<Journal>,
}

/// Counts and gap figures of a journal, from `sp_journal_status`. Plain values, owned by the
/// caller. Fields were only ever appended: a host compiled against an older header reads a
/// prefix of this struct.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_journal_stats {
    /// Deliveries handled: finished with a stored reply.
    pub handled: u64,
    /// Deliveries answered from the journal with a stored reply.
    pub replayed: u64,
    /// Deliveries whose key came before with other decisive content (refused, or handed out as
    /// new because the first was never finished), every one counted.
    pub conflicts: u64,
    /// Deliveries refused by validation whose body named an event and whose index could be read.
    pub refused: u64,
    /// Deliveries claimed and neither finished nor abandoned (including claims whose worker died
    /// and whose lease ran out, until the next delivery takes them over).
    pub in_progress: u64,
    /// Indexes between the first index and the highest seen that were never seen, leaving out
    /// the stretches of index jumps; unrecoverable ones included.
    pub missing: u64,
    /// The index gap detection counts from (configured, else the lowest seen).
    pub has_first_index: bool,
    pub first_index: i64,
    /// The highest index seen.
    pub has_highest_index: bool,
    pub highest_index: i64,
    /// Every index from the first up to this one was seen; `has_watermark` is false when the
    /// first one was not.
    pub has_watermark: bool,
    pub watermark: i64,
    /// Deliveries claimed and never finished: abandoned, or claimed with their lease run out.
    /// Nothing was stored for them; the service or a recovery must deliver them again.
    pub unfinished: u64,
    /// Conflicts (entries of the `SP_JOURNAL_REPORT_CONFLICTS` report) no operator resolved yet
    /// (`sp_journal_resolve_conflict`).
    pub open_conflicts: u64,
    /// Index jumps and reused indexes (entries of the `SP_JOURNAL_REPORT_INDEX_JUMPS` report) no
    /// operator decided yet (`sp_journal_accept_jump`, `sp_journal_jump_is_gap`).
    pub index_jumps: u64,
    /// Indexes of the current numbering closed by hand (`sp_journal_resolve`).
    pub resolved: u64,
    /// Indexes, missing or carrying an unfinished delivery, the service answered 404 for
    /// `not_found_limit` runs of recovery (`sp_journal_config_set_not_found_limit`): no longer
    /// fetched.
    pub unrecoverable: u64,
    /// The current numbering: 1 until `sp_journal_renumber`.
    pub numbering: i64,
}

/// An inclusive range of missing indexes: `first` to `last`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct sp_index_range {
    pub first: i64,
    pub last: i64,
}

/// Missing indexes from `sp_journal_missing`: `len` ranges at `ranges` (NULL when none), in
/// order. Owned by the caller until `sp_index_ranges_free`. One thread at a time.
#[repr(C)]
#[derive(Debug)]
pub struct sp_index_ranges {
    pub ranges: *const sp_index_range,
    pub len: usize,
}

/// The allocation behind an `sp_index_ranges` pointer: the public struct first, then the ranges.
#[repr(C)]
struct RangesBox {
    view: sp_index_ranges,
    ranges: Vec<sp_index_range>,
}

/// Creates a configuration for the journal at `url`: `sqlite:PATH` (one SQLite file that every
/// process and thread of a host shares; created if absent) or `postgres://USER@HOST/DATABASE`
/// (several hosts). Defaults: lease 30 s, busy wait 2 s, durable replies (SQLite
/// `synchronous=FULL`, PostgreSQL `synchronous_commit=on`), first index the lowest seen, replies
/// up to 64 KiB, lock time-out 5 s, index jumps beyond 100,000, unrecoverable after 3 runs of
/// 404. On success `*out` owns the configuration; free it with
/// `sp_journal_config_free`.
///
/// # Safety
/// `url` is NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_new(url: *const c_char, out: *mut *mut sp_journal_config) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (url, out) = unsafe { (args::text("url", url)?, args::out("out", out)?) };
        out.write(owned::into_raw(sp_journal_config { url: url.to_owned(), options: JournalOptions::default() }));
        Ok(())
    })
}

/// Frees a configuration. NULL is allowed and does nothing.
///
/// # Safety
/// `config` is NULL or came from `sp_journal_config_new` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_free(config: *mut sp_journal_config) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<sp_journal_config, _>(config) } })
}

/// Applies `change` to the options behind `config`.
unsafe fn configure(
    config: *mut sp_journal_config,
    change: impl FnOnce(&mut JournalOptions) -> Result<()>,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or a live configuration it does not share.
        let config = unsafe { args::object_mut("config", config) }?;
        Ok(change(&mut config.options)?)
    })
}

/// Sets how long a claim is held for a worker that neither finishes nor abandons it (it died)
/// before the next delivery takes it over as attempt 2, in milliseconds (1 ms to 24 h; default
/// 30000). Longer than the partner's longest handling, shorter than the service's retry interval.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_lease_ms(config: *mut sp_journal_config, ms: u64) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            o.lease = Duration::from_millis(ms);
            Ok(())
        })
    }
}

/// Sets how long `sp_event_begin` waits for another worker's live claim on the same delivery
/// before failing with `SP_ERR_BUSY`, in milliseconds (at most 24 h; default 2000).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_busy_wait_ms(config: *mut sp_journal_config, ms: u64) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            o.busy_wait = Duration::from_millis(ms);
            Ok(())
        })
    }
}

/// When `durable` is true (the default), a stored reply is flushed to disk before
/// `sp_event_finish` returns (SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit=on`) and
/// survives a power loss; when false it survives a crash of the process, not of the machine.
/// Claims are always written the cheaper way: a claim lost to a power loss only makes the next
/// delivery run the partner's logic again, which its ledger's unique `transactionId` absorbs.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_durable(config: *mut sp_journal_config, durable: bool) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            o.synchronous = if durable { Synchronous::Full } else { Synchronous::Normal };
            Ok(())
        })
    }
}

/// Sets the index gap detection counts from (stored in the journal, so that every process and a
/// later `sp_journal_status` count from it); a negative value means none (the default: the
/// lowest index seen).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_first_index(config: *mut sp_journal_config, index: i64) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            o.first_index = (index >= 0).then_some(index);
            Ok(())
        })
    }
}

/// Sets the largest reply `sp_event_finish` stores, in bytes (at least 1; default 65536).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_max_reply_bytes(
    config: *mut sp_journal_config,
    bytes: usize,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            o.max_reply_bytes = bytes;
            Ok(())
        })
    }
}

/// Sets how long one statement waits for a lock another process holds (SQLite's busy time-out,
/// PostgreSQL's `lock_timeout` and connect time-out), in milliseconds (default 5000).
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_lock_timeout_ms(config: *mut sp_journal_config, ms: u64) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            o.lock_timeout = Duration::from_millis(ms);
            Ok(())
        })
    }
}

/// Sets how far beyond the highest index seen an index may land and still open a gap of its
/// size (at least 1; default 100000). Beyond it the index is recorded as an index jump (the
/// `SP_JOURNAL_REPORT_INDEX_JUMPS` report): the stretch between is not counted missing, and an
/// operator decides it (`sp_journal_accept_jump`, `sp_journal_jump_is_gap`). A value below 1
/// fails with `SP_ERR_INVALID_ARGUMENT` (field `max_index_jump`) and changes nothing.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_max_index_jump(
    config: *mut sp_journal_config,
    max_jump: i64,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            if max_jump < 1 {
                let problem = format!("must be at least 1, got {max_jump}");
                return Err(Error::field(ErrorKind::InvalidArgument, "max_index_jump", problem));
            }
            o.max_index_jump = max_jump;
            Ok(())
        })
    }
}

/// Sets how many runs of recovery may get HTTP 404 for an index before it is reported
/// unrecoverable and no longer fetched (at least 1; default 3); a missing one stays missing until
/// resolved by hand (`sp_journal_resolve`), one carrying an unfinished delivery stays unfinished
/// until closed by hand (`sp_journal_close_unfinished`). 0 fails with `SP_ERR_INVALID_ARGUMENT` (field
/// `not_found_limit`) and changes nothing.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_not_found_limit(config: *mut sp_journal_config, runs: u32) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            if runs == 0 {
                return Err(Error::field(ErrorKind::InvalidArgument, "not_found_limit", "must be at least 1, got 0"));
            }
            o.not_found_limit = runs;
            Ok(())
        })
    }
}

/// Opens the journal `config` names, creating its tables the first time (the schema carries a
/// version; a journal of a newer version is refused). Fails with `SP_ERR_INVALID_ARGUMENT` for an
/// unusable URL or setting (field `journal_url` or the setting's name) and `SP_ERR_JOURNAL` when
/// the storage cannot be used (unreachable server, read-only or corrupt file). On success `*out`
/// owns the journal; free it with `sp_journal_free`.
///
/// # Safety
/// `config` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_open(config: *const sp_journal_config, out: *mut *mut sp_journal) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / writable pointers.
        let (config, out) = unsafe { (args::object("config", config)?, args::out("out", out)?) };
        let journal = Journal::open(&config.url, &config.options)?;
        out.write(owned::into_raw(sp_journal { inner: Arc::new(journal) }));
        Ok(())
    })
}

/// Frees a journal. NULL is allowed and does nothing. Receivers it is attached to keep it open.
///
/// # Safety
/// `journal` is NULL or came from `sp_journal_open`, is used by no other thread now and not used
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_free(journal: *mut sp_journal) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<sp_journal, _>(journal) } })
}

/// Counts and gap figures: handled, replayed, conflicts, refused, in progress, missing, the
/// first index, highest index and watermark, and what waits for an operator (unfinished
/// deliveries, open conflicts and index jumps, unrecoverable indexes) beside what was resolved by
/// hand and the current numbering. Fails with `SP_ERR_JOURNAL` when the storage fails.
///
/// # Safety
/// `journal` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_status(journal: *const sp_journal, out: *mut sp_journal_stats) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / writable pointers.
        let (journal, out) = unsafe { (args::object("journal", journal)?, args::out("out", out)?) };
        let s = journal.inner.status()?;
        out.write(sp_journal_stats {
            handled: s.handled,
            replayed: s.replayed,
            conflicts: s.conflicts,
            refused: s.refused,
            in_progress: s.in_progress,
            missing: s.missing,
            has_first_index: s.first_index.is_some(),
            first_index: s.first_index.unwrap_or(0),
            has_highest_index: s.highest_index.is_some(),
            highest_index: s.highest_index.unwrap_or(0),
            has_watermark: s.watermark.is_some(),
            watermark: s.watermark.unwrap_or(0),
            unfinished: s.unfinished,
            open_conflicts: s.open_conflicts,
            index_jumps: s.index_jumps,
            resolved: s.resolved,
            unrecoverable: s.unrecoverable,
            numbering: s.numbering,
        });
        Ok(())
    })
}

/// The indexes never seen between the first index and the highest seen, as at most `limit`
/// inclusive ranges in order (the cost grows with `limit`, not with the deliveries). `limit` must
/// be 1 to 1,000,000. On success `*out` owns the ranges; free them with `sp_index_ranges_free`.
///
/// # Safety
/// `journal` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_missing(
    journal: *const sp_journal,
    limit: usize,
    out: *mut *mut sp_index_ranges,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / writable pointers.
        let (journal, out) = unsafe { (args::object("journal", journal)?, args::out("out", out)?) };
        if !(1..=1_000_000).contains(&limit) {
            let problem = format!("expected 1 to 1000000, got {limit}");
            return Err(Error::field(ErrorKind::InvalidArgument, "limit", problem).into());
        }
        let ranges: Vec<sp_index_range> =
            journal.inner.missing(limit)?.into_iter().map(|(first, last)| sp_index_range { first, last }).collect();
        let first = if ranges.is_empty() { std::ptr::null() } else { ranges.as_ptr() };
        let view = sp_index_ranges { ranges: first, len: ranges.len() };
        out.write(owned::into_raw::<RangesBox, _>(RangesBox { view, ranges }));
        Ok(())
    })
}

/// Frees ranges from `sp_journal_missing`. NULL is allowed and does nothing.
///
/// # Safety
/// `ranges` is NULL or came from `sp_journal_missing` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_index_ranges_free(ranges: *mut sp_index_ranges) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<RangesBox, _>(ranges) } })
}

/// What `sp_journal_report` lists. The function takes the kind as an `int32_t`, so that any
/// value a host passes is safe: one not listed here is refused.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_journal_report_kind {
    /// Index jumps, reused indexes and renumberings, newest first: objects with `id`, `kind`
    /// (`jump`, `reused`, `renumbered`), `index`, `previous_highest`, `key`, `name`, `other_key`,
    /// `count`, `last_index`, `numbering`, `at_ms`, `last_ms`, `decision` (`accepted`, `gap`, or
    /// null while open), `decided_ms` and `note`.
    SP_JOURNAL_REPORT_INDEX_JUMPS = 1,
    /// Conflicts, newest first: objects with `id`, `key`, `name`, `transaction_id`, `index`,
    /// `first_content`, `now_content`, `differing` (strings `field: first X, now Y`), `outcome`
    /// (`refused`, or `handed_out` when the first was never finished), `count`, `first_ms`,
    /// `last_ms`, `resolved_ms` (null while open) and `note`.
    SP_JOURNAL_REPORT_CONFLICTS = 2,
    /// Ranges resolved by hand, newest first: objects with `id`, `first`, `last`, `closed` (how
    /// many were missing), `numbering`, `note` and `at_ms`; an unfinished delivery closed by hand
    /// (`sp_journal_close_unfinished`) is one with `first` = `last` = its index, `closed` 0 and
    /// the delivery's key named in `note`.
    SP_JOURNAL_REPORT_RESOLUTIONS = 3,
    /// Indexes no longer fetched (404 for `not_found_limit` runs), missing or carrying an
    /// unfinished delivery, lowest first: integers.
    SP_JOURNAL_REPORT_UNRECOVERABLE = 4,
}

impl sp_journal_report_kind {
    fn of(kind: i32) -> Result<sp_journal_report_kind> {
        use sp_journal_report_kind::*;
        Ok(match kind {
            1 => SP_JOURNAL_REPORT_INDEX_JUMPS,
            2 => SP_JOURNAL_REPORT_CONFLICTS,
            3 => SP_JOURNAL_REPORT_RESOLUTIONS,
            4 => SP_JOURNAL_REPORT_UNRECOVERABLE,
            other => {
                let problem = format!("expected an sp_journal_report_kind (1 to 4), got {other}");
                return Err(Error::field(ErrorKind::InvalidArgument, "kind", problem));
            }
        })
    }
}

/// Writes `value` through `out` when the caller gave one (an optional out-parameter).
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn write_optional<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL and, by the caller's promise, writable.
        unsafe { out.write(value) };
    }
}

/// Closes the missing indexes `first` to `last` (inclusive) by hand: events the service
/// confirms do not exist, or that were settled another way. They no longer count as missing and
/// recovery no longer fetches them. `note` (required: why, at most 4096 bytes of text) is kept
/// for audit with the range (the `SP_JOURNAL_REPORT_RESOLUTIONS` report). On success `*closed`
/// (when `closed` is not NULL) gets how many of the range's indexes were missing.
///
/// Fails with `SP_ERR_INVALID_ARGUMENT`, field `note` (NULL, empty, too long, control
/// characters) or `range` (`first` above `last`, a negative index, or `last` beyond the highest
/// index seen: nothing is missing there); `SP_ERR_JOURNAL` when the storage fails.
///
/// # Safety
/// `journal` is NULL or live; `note` is NULL or NUL-terminated; `closed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_resolve(
    journal: *const sp_journal,
    first: i64,
    last: i64,
    note: *const c_char,
    closed: *mut u64,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, note) = unsafe { (args::object("journal", journal)?, args::text("note", note)?) };
        let count = journal.inner.resolve(first, last, note)?;
        // SAFETY: the caller promises NULL or a writable uint64_t.
        unsafe { write_optional(closed, count) };
        Ok(())
    })
}

/// Accepts the open index jump or reused index `id` (its `id` in the
/// `SP_JOURNAL_REPORT_INDEX_JUMPS` report): the service's numbering really moved, and a jump's
/// stretch is no events. `note` (required) is kept for audit. Fails with
/// `SP_ERR_INVALID_ARGUMENT`, field `id` (no open entry has it) or `note`; `SP_ERR_JOURNAL` when
/// the storage fails.
///
/// # Safety
/// `journal` is NULL or live; `note` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_accept_jump(journal: *const sp_journal, id: i64, note: *const c_char) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, note) = unsafe { (args::object("journal", journal)?, args::text("note", note)?) };
        Ok(journal.inner.accept_jump(id, note)?)
    })
}

/// Declares the open index jump `id` a gap (a real outage longer than `max_index_jump`): the
/// stretch between the highest index before it and the jump counts as missing again, for
/// recovery to fetch. `note` (required) is kept for audit. Fails as `sp_journal_accept_jump`
/// does.
///
/// # Safety
/// `journal` is NULL or live; `note` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_jump_is_gap(journal: *const sp_journal, id: i64, note: *const c_char) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, note) = unsafe { (args::object("journal", journal)?, args::text("note", note)?) };
        Ok(journal.inner.jump_is_gap(id, note)?)
    })
}

/// Marks the open conflict `id` (its `id` in the `SP_JOURNAL_REPORT_CONFLICTS` report)
/// resolved, with `note` (required) kept for audit. Fails with `SP_ERR_INVALID_ARGUMENT`, field
/// `id` (no open conflict has it) or `note`; `SP_ERR_JOURNAL` when the storage fails.
///
/// # Safety
/// `journal` is NULL or live; `note` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_resolve_conflict(
    journal: *const sp_journal,
    id: i64,
    note: *const c_char,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, note) = unsafe { (args::object("journal", journal)?, args::text("note", note)?) };
        Ok(journal.inner.resolve_conflict(id, note)?)
    })
}

/// Closes by hand the unfinished deliveries (abandoned, or claimed with their lease run out)
/// carrying index `index`: events the service answers 404 for, settled another way, or of an
/// earlier numbering. They no longer count as unfinished (`sp_journal_stats.unfinished`) and
/// recovery no longer fetches them; a later delivery of such an event still runs as its next
/// attempt. `note` (required) is kept for audit (the `SP_JOURNAL_REPORT_RESOLUTIONS` report). On
/// success `*closed` (when `closed` is not NULL) gets how many deliveries were closed. Fails with
/// `SP_ERR_INVALID_ARGUMENT`, field `index` (no unfinished delivery carries it) or `note`;
/// `SP_ERR_JOURNAL` when the storage fails.
///
/// # Safety
/// `journal` is NULL or live; `note` is NULL or NUL-terminated; `closed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_close_unfinished(
    journal: *const sp_journal,
    index: i64,
    note: *const c_char,
    closed: *mut u64,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, note) = unsafe { (args::object("journal", journal)?, args::text("note", note)?) };
        let count = journal.inner.close_unfinished(index, note)?;
        // SAFETY: the caller promises NULL or a writable uint64_t.
        unsafe { write_optional(closed, count) };
        Ok(())
    })
}

/// Starts a new numbering from index `first` after the service restarted its indexes: the seen
/// indexes of the old numbering are archived, gap detection counts from `first` afresh, and
/// every record and stored reply stays (events keyed by index keep theirs under a key of the old
/// numbering, so that the new numbering's events never meet them; refunds and payouts, keyed by
/// `transactionId`, are untouched). Open index jumps of the old numbering are settled. `note`
/// (required) is kept for audit. On success `*numbering` (when `numbering` is not NULL) gets the
/// new numbering. Fails with `SP_ERR_INVALID_ARGUMENT`, field `first_index` (negative) or
/// `note`; `SP_ERR_JOURNAL` when the storage fails.
///
/// # Safety
/// `journal` is NULL or live; `note` is NULL or NUL-terminated; `numbering` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_renumber(
    journal: *const sp_journal,
    first: i64,
    note: *const c_char,
    numbering: *mut i64,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, note) = unsafe { (args::object("journal", journal)?, args::text("note", note)?) };
        let new = journal.inner.renumber(first, note)?;
        // SAFETY: the caller promises NULL or a writable int64_t.
        unsafe { write_optional(numbering, new) };
        Ok(())
    })
}

/// What the journal keeps for an operator, as a JSON array in a buffer: `kind` is an
/// `sp_journal_report_kind` (its entries say what each holds), at most `limit` entries (0 gives
/// `[]`; `SIZE_MAX` means all). `all` adds the decided index jumps and the resolved conflicts to
/// the open ones; it does not change the resolutions or the unrecoverable indexes. Fails with
/// `SP_ERR_INVALID_ARGUMENT`, field `kind` for a value that is no `sp_journal_report_kind`;
/// `SP_ERR_JOURNAL` when the storage fails. On success `*out` owns the buffer (NUL-terminated
/// UTF-8); free it with `sp_buffer_free`.
///
/// # Safety
/// `journal` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_report(
    journal: *const sp_journal,
    kind: i32,
    all: bool,
    limit: usize,
    out: *mut *mut sp_buffer,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / writable pointers.
        let (journal, out) = unsafe { (args::object("journal", journal)?, args::out("out", out)?) };
        let journal = &journal.inner;
        let json = match sp_journal_report_kind::of(kind)? {
            sp_journal_report_kind::SP_JOURNAL_REPORT_INDEX_JUMPS => to_json(&journal.index_jumps(all, limit)?),
            sp_journal_report_kind::SP_JOURNAL_REPORT_CONFLICTS => to_json(&journal.conflicts(all, limit)?),
            sp_journal_report_kind::SP_JOURNAL_REPORT_RESOLUTIONS => to_json(&journal.resolutions(limit)?),
            sp_journal_report_kind::SP_JOURNAL_REPORT_UNRECOVERABLE => to_json(&journal.unrecoverable(limit)?),
        };
        out.write(reply::into_raw(json));
        Ok(())
    })
}

/// The JSON text of a report's entries: plain structs of strings and numbers, which always
/// serialize (were one ever not to, the boundary would answer `SP_ERR_PANIC`).
fn to_json<T: serde::Serialize>(entries: &[T]) -> String {
    serde_json::to_string(entries).expect("report entries serialize to JSON")
}
