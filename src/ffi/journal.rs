//! The delivery journal: `sp_journal_config_*` to configure it, `sp_journal_open`, then attach it
//! to a receiver (`sp_receiver_config_set_journal`) and claim each event with `sp_event_begin`
//! (in `ffi/event.rs`). `sp_journal_status`, `sp_journal_vitals`, `sp_journal_missing` and
//! `sp_journal_missing_older_than` answer what was seen; `sp_journal_prune` (or the journal's own
//! retention, `sp_journal_config_set_retention_ms`) removes what the service can no longer
//! resend; `sp_journal_report` lists what waits for an operator, and `sp_journal_resolve`,
//! `sp_journal_accept_jump`, `sp_journal_jump_is_gap`, `sp_journal_resolve_conflict`,
//! `sp_journal_close_unfinished` and `sp_journal_renumber` settle it, each with a note kept for
//! audit; `sp_journal_backup` copies a SQLite journal while workers write; `sp_journal_export`
//! writes the deliveries of a period to a file, for reconciliation.

use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::ffi::args;
use crate::ffi::owned;
use crate::ffi::reply::{self, sp_buffer};
use crate::ffi::status::sp_status;
use crate::journal::{ExportFormat, Journal, JournalOptions, PruneOptions, Synchronous};

/// A journal's URL and settings, filled in by the `sp_journal_config_set_*` functions. Created by
/// `sp_journal_config_new`, freed by `sp_journal_config_free`. One thread at a time.
pub struct sp_journal_config {
    pub(crate) url: String,
    pub(crate) options: JournalOptions,
}

/// An open delivery journal. Created by `sp_journal_open`, freed by `sp_journal_free`. Any number
/// of threads may use one journal at the same time; receivers it is attached to and events they
/// handed out keep it alive after `sp_journal_free`. Connections are pooled per process and URL.
pub struct sp_journal {
    pub(crate) inner: Arc<Journal>,
}

/// Counts and gap figures of a journal, from `sp_journal_status`. Plain values, owned by the
/// caller. The library writes the whole struct into the caller's memory, so its layout is fixed:
/// a field added here would be written past the end of a struct a host compiled against an
/// earlier header allocated. New figures come in a struct of their own, with a function of their
/// own (`sp_journal_vital_signs`, from `sp_journal_vitals`).
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

impl_zero_padded!(sp_journal_stats {
    handled,
    replayed,
    conflicts,
    refused,
    in_progress,
    missing,
    has_first_index,
    first_index,
    has_highest_index,
    highest_index,
    has_watermark,
    watermark,
    unfinished,
    open_conflicts,
    index_jumps,
    resolved,
    unrecoverable,
    numbering
});

/// A journal's vital signs, from `sp_journal_vitals`: what retention did, how big the journal
/// is, and how long ago it last heard from the service. Plain values, owned by the caller. Times
/// are milliseconds since the Unix epoch on the journal's clock (on PostgreSQL, the server's);
/// each optional figure is meaningful only when its `has_` flag is true. Its layout is fixed, as
/// `sp_journal_stats`'s is.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_journal_vital_signs {
    /// Deliveries compacted by retention (`sp_journal_prune`, or the journal's own retention,
    /// `sp_journal_config_set_retention_ms`) since the journal was created: their reply and
    /// content removed, a digest kept.
    pub pruned: u64,
    /// Compact records removed entirely (`sp_prune_options.forget_older_than_ms`) since the
    /// journal was created.
    pub forgotten: u64,
    /// The bytes the journal takes: on SQLite the file and its write-ahead log, on PostgreSQL its
    /// tables with their indexes (`pg_total_relation_size`). Not known when `has_size_bytes` is
    /// false.
    pub has_size_bytes: bool,
    pub size_bytes: u64,
    /// When the oldest delivery kept whole (its reply stored) was finished: what the next prune
    /// compacts first. `has_oldest_record_ms` is false when no delivery is kept whole.
    pub has_oldest_record_ms: bool,
    pub oldest_record_ms: i64,
    /// When a new index was last seen (a delivery carrying an index the journal had not seen: an
    /// event, a balance query, a refused body; not a repeat). A busy casino that sees none for
    /// long has a broken route. On PostgreSQL, within a batch of its arrival.
    /// `has_last_delivery_ms` is false when none was seen since the journal's schema version 3.
    pub has_last_delivery_ms: bool,
    pub last_delivery_ms: i64,
    /// When the oldest missing index was found missing (an index above it was first seen); none
    /// when nothing is missing.
    pub has_oldest_gap_ms: bool,
    pub oldest_gap_ms: i64,
}

impl_zero_padded!(sp_journal_vital_signs {
    pruned,
    forgotten,
    has_size_bytes,
    size_bytes,
    has_oldest_record_ms,
    oldest_record_ms,
    has_last_delivery_ms,
    last_delivery_ms,
    has_oldest_gap_ms,
    oldest_gap_ms
});

/// An inclusive range of missing indexes: `first` to `last`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct sp_index_range {
    pub first: i64,
    pub last: i64,
}

/// Missing indexes from `sp_journal_missing` or `sp_journal_missing_older_than`: `len` ranges at
/// `ranges` (NULL when none), in order. Owned by the caller until `sp_index_ranges_free`. One
/// thread at a time.
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

/// When `at_finish` is true, a new delivery's claim is written only by `sp_event_finish`,
/// together with the stored reply and the staged statements, in one transaction: half the
/// journal's writes and commits a delivery. The default, false, writes the claim in
/// `sp_event_begin` in a commit of its own. With true, two deliveries of one key arriving at
/// once may both run the logic: the first `sp_event_finish` to commit stores its delivery, and
/// none of the other's staged statements take effect: its `sp_event_finish` returns `SP_OK` when
/// the stored delivery has the same content and the very same reply (the event was handled once
/// and this reply is the stored one), else `SP_ERR_CLAIM_LOST` (answer 503). Choose
/// it only when everything the logic does is staged (`sp_event_stage`) or absorbed by the
/// ledger's unique `transactionId`, never when it calls out before finishing. A worker dying
/// before `sp_event_finish` leaves nothing: the index stays missing and recovery fetches it;
/// `sp_event_abandon` stores the delivery abandoned, as without it. Keys the journal holds
/// already (repeats, abandoned or expired claims) are claimed as without it.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_claim_at_finish(
    config: *mut sp_journal_config,
    at_finish: bool,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            o.claim_at_finish = at_finish;
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

/// Sets how long one round trip to a PostgreSQL journal waits for the server's answer, in
/// milliseconds (default: the lock time-out + 10000, 15000 with the defaults). Past it the
/// connection is closed and the call fails with `SP_ERR_JOURNAL` (transient: answer 503); the
/// URL's `command_timeout` (seconds) wins over it. Between 1 ms and 24 hours: another value makes
/// `sp_journal_open` fail with `SP_ERR_INVALID_ARGUMENT` (field `command_timeout`). SQLite does
/// not use it: its waits are the lock time-out.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_command_timeout_ms(
    config: *mut sp_journal_config,
    ms: u64,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            o.command_timeout = Some(Duration::from_millis(ms));
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

/// The shortest retention and `older_than` of a prune, in milliseconds: a day. The service
/// resends a delivery for far less, and a reply younger than that is what its repeats get.
const DAY_MS: u64 = 24 * 3600 * 1000;

/// Sets the journal's own retention, in milliseconds: 0 (the default) keeps every reply until
/// `sp_journal_prune` is called; otherwise at least 86400000 (a day). With a retention,
/// `sp_event_finish` runs, at most once a second per open journal and after its own commit, one
/// batch of `sp_journal_prune` with `older_than_ms` the retention and compact records kept (the
/// delivery waits for that batch: a few milliseconds, once a second); a failure of that batch
/// does not fail the finish. A value from 1 to 86399999, or from `INT64_MAX` on, fails with
/// `SP_ERR_INVALID_ARGUMENT` (field `retention`) and changes nothing. What retention removes and
/// what a repeat beyond it gets: `sp_journal_prune`.
///
/// # Safety
/// `config` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_config_set_retention_ms(config: *mut sp_journal_config, ms: u64) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe {
        configure(config, |o| {
            if ms != 0 && !(DAY_MS..i64::MAX as u64).contains(&ms) {
                let problem = format!("must be 0 (off) or 86400000 ms (1 day) to {} ms, got {ms}", i64::MAX - 1);
                return Err(Error::field(ErrorKind::InvalidArgument, "retention", problem));
            }
            o.retention = (ms != 0).then(|| Duration::from_millis(ms));
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
        out.write_zero_padded(sp_journal_stats {
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
        check_ranges_limit(limit)?;
        out.write(ranges_into_raw(journal.inner.missing(limit)?));
        Ok(())
    })
}

/// Refuses a `limit` of missing ranges outside 1 to 1,000,000 (field `limit`).
fn check_ranges_limit(limit: usize) -> Result<()> {
    if !(1..=1_000_000).contains(&limit) {
        let problem = format!("expected 1 to 1000000, got {limit}");
        return Err(Error::field(ErrorKind::InvalidArgument, "limit", problem));
    }
    Ok(())
}

/// Hands out `pairs` as ranges the caller frees with `sp_index_ranges_free`.
fn ranges_into_raw(pairs: Vec<(i64, i64)>) -> *mut sp_index_ranges {
    let ranges: Vec<sp_index_range> = pairs.into_iter().map(|(first, last)| sp_index_range { first, last }).collect();
    let first = if ranges.is_empty() { std::ptr::null() } else { ranges.as_ptr() };
    let view = sp_index_ranges { ranges: first, len: ranges.len() };
    owned::into_raw::<RangesBox, _>(RangesBox { view, ranges })
}

/// The missing ranges found missing at least `min_age_ms` milliseconds ago (an index above them
/// was first seen that long ago), as at most `limit` inclusive ranges in order, like
/// `sp_journal_missing`: a younger gap is usually an event still on its way (reordering, the
/// service's own retry), and recovering it at once would race its delivery. `min_age_ms` 0 gives
/// what `sp_journal_missing` gives. `limit` must be 1 to 1,000,000 (field `limit`). Fails with
/// `SP_ERR_JOURNAL` when the storage fails. On success `*out` owns the ranges; free them with
/// `sp_index_ranges_free`.
///
/// # Safety
/// `journal` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_missing_older_than(
    journal: *const sp_journal,
    min_age_ms: u64,
    limit: usize,
    out: *mut *mut sp_index_ranges,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / writable pointers.
        let (journal, out) = unsafe { (args::object("journal", journal)?, args::out("out", out)?) };
        check_ranges_limit(limit)?;
        let ranges = journal.inner.missing_older_than(Duration::from_millis(min_age_ms), limit)?;
        out.write(ranges_into_raw(ranges));
        Ok(())
    })
}

/// Frees ranges from `sp_journal_missing` or `sp_journal_missing_older_than`. NULL is allowed
/// and does nothing.
///
/// # Safety
/// `ranges` is NULL or came from `sp_journal_missing` or `sp_journal_missing_older_than` and is
/// not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_index_ranges_free(ranges: *mut sp_index_ranges) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<RangesBox, _>(ranges) } })
}

/// The journal's vital signs (see `sp_journal_vital_signs`): deliveries compacted and records
/// forgotten by retention, the journal's size, when its oldest whole record was finished, when a
/// new index last arrived and when the oldest gap opened. Reads what `sp_journal_status` reads,
/// and the journal's size besides: it costs about as much. Fails with `SP_ERR_JOURNAL` when the
/// storage fails.
///
/// # Safety
/// `journal` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_vitals(journal: *const sp_journal, out: *mut sp_journal_vital_signs) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / writable pointers.
        let (journal, out) = unsafe { (args::object("journal", journal)?, args::out("out", out)?) };
        let s = journal.inner.status()?;
        out.write_zero_padded(sp_journal_vital_signs {
            pruned: s.pruned,
            forgotten: s.forgotten,
            has_size_bytes: s.size_bytes.is_some(),
            size_bytes: s.size_bytes.unwrap_or(0),
            has_oldest_record_ms: s.oldest_record_ms.is_some(),
            oldest_record_ms: s.oldest_record_ms.unwrap_or(0),
            has_last_delivery_ms: s.last_delivery_ms.is_some(),
            last_delivery_ms: s.last_delivery_ms.unwrap_or(0),
            has_oldest_gap_ms: s.oldest_gap_ms.is_some(),
            oldest_gap_ms: s.oldest_gap_ms.unwrap_or(0),
        });
        Ok(())
    })
}

/// What `sp_journal_prune` removes, read by the library from the caller's memory. Fill it with
/// `sp_prune_options_default`, then change what differs: the defaults stay the library's. Its
/// layout is fixed (the library reads the whole struct): new options would come in a struct of
/// their own.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct sp_prune_options {
    /// Finished deliveries finished longer ago than this are compacted: their reply and content
    /// removed, a digest of their decisive content and the reply's outcome kept. At least
    /// 86400000 (a day).
    pub older_than_ms: u64,
    /// Compact records older than this are removed entirely; 0 (the default) keeps them. Longer
    /// than `older_than_ms` when not 0.
    pub forget_older_than_ms: u64,
    /// Rows per transaction, 1 to 100000; 0 for the default, 200. A delivery waits for at most
    /// one batch.
    pub batch: u32,
    /// The pause between two batches, at most 60000 ms, so that deliveries are not queued behind
    /// a long run of batches (the default is 10; 0 pauses not at all).
    pub pause_ms: u32,
    /// Stop after about this long, whatever is left (the next prune goes on); 0 (the default):
    /// until nothing eligible is left.
    pub max_time_ms: u64,
}

/// What `sp_journal_prune` did. Plain values, owned by the caller; its layout is fixed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct sp_prune_report {
    /// Finished deliveries compacted (reply and content removed, digest kept).
    pub compacted: u64,
    /// Compact records removed (`forget_older_than_ms`).
    pub forgotten: u64,
    /// Records of deliveries refused by validation removed.
    pub refused_removed: u64,
    /// Refusals resolved by an operator removed (entries of the `SP_JOURNAL_REPORT_CONFLICTS`
    /// report).
    pub conflicts_removed: u64,
    /// Transactions run.
    pub batches: u64,
    /// The longest a batch's transaction took, in microseconds: what a delivery may have waited
    /// for it.
    pub longest_batch_us: u64,
    /// Bytes given back to the file system (SQLite journals created by this release); 0 on
    /// PostgreSQL, whose autovacuum reuses the space, and on older SQLite journals, where SQLite
    /// reuses it for new deliveries.
    pub bytes_returned: u64,
    /// Whether nothing eligible is left: false when `max_time_ms` stopped the prune first, or when
    /// an export was running (`sp_journal_export`: a delivery compacted under it would move past
    /// its page and be listed twice), which a prune waits for by stopping at once: run it again
    /// once the export is done.
    pub complete: bool,
    /// Whether it stopped at once for an export running (`complete` is false): run it again
    /// once the export is done.
    pub export_running: bool,
}

impl_zero_padded!(sp_prune_report {
    compacted,
    forgotten,
    refused_removed,
    conflicts_removed,
    batches,
    longest_batch_us,
    bytes_returned,
    complete,
    export_running
});

/// Fills `*out` with the library's default options for a prune of what is older than
/// `older_than_ms`: compact records kept, batches of 200 rows 10 ms apart, no time limit. Checks
/// nothing but `out` (`sp_journal_prune` checks the options).
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_prune_options_default(out: *mut sp_prune_options, older_than_ms: u64) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or a writable sp_prune_options.
        let out = unsafe { args::out("out", out)? };
        let defaults = PruneOptions::older_than(Duration::from_millis(older_than_ms));
        out.write(sp_prune_options {
            older_than_ms,
            forget_older_than_ms: defaults
                .forget_older_than
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            batch: u32::try_from(defaults.batch).unwrap_or(u32::MAX),
            pause_ms: u32::try_from(defaults.pause.as_millis()).unwrap_or(u32::MAX),
            max_time_ms: defaults.max_time.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        });
        Ok(())
    })
}

/// Removes what the service can no longer resend, in batches of `options->batch` rows, each its
/// own short transaction, `options->pause_ms` apart, then gives the pages a SQLite journal freed
/// back to the file system. Safe while workers write: a delivery waits for at most one batch
/// (`out->longest_batch_us`). Blocks the calling thread until done or `options->max_time_ms` has
/// passed: run it from cron or an operator's command (`slotpartner journal prune`), or on a
/// thread of its own, never inside a callback. `sp_journal_config_set_retention_ms` has the
/// library run it by itself instead, a batch at a time.
///
/// - A finished delivery finished more than `older_than_ms` ago is compacted (counted back from
///   now, or from the newest stored reply when that is earlier: a clock stepped ahead never ages
///   a reply finished just now): its reply and content go, a digest of its decisive content and
///   its reply's outcome stay under its key. A repeat of it with the same decisive content is
///   handed out as its next attempt
///   (`SP_BEGIN_NEW`, attempt 2 and on) with `sp_event_reply_pruned` true: the stored reply is
///   gone, and the partner's ledger, keyed by `transactionId`, decides, exactly as after a crash
///   between its commit and `sp_event_finish`. A repeat with other decisive content is a
///   conflict (`SP_ERR_CONFLICT`).
/// - With `forget_older_than_ms`, compact records older than it are removed: a repeat of one is
///   then a new delivery (attempt 1), and only the partner's ledger knows it.
/// - Records of deliveries refused by validation, and refusals resolved by an operator, older
///   than `older_than_ms` are removed.
/// - Never removed: an unfinished delivery (claimed, abandoned, closed by hand), a delivery with
///   an open conflict or whose key was handed out with other content (its reply answers both),
///   unresolved conflicts, open index jumps, and the indexes seen (no gap opens or closes:
///   `sp_journal_status` counts the same missing indexes before and after).
///
/// On success `*out` gets what was done. Fails with `SP_ERR_INVALID_ARGUMENT`, field `journal`,
/// `options` or `out` for a NULL one, `older_than` for an `older_than_ms` below a day (or from
/// `INT64_MAX` on), `forget_older_than` for one not longer than `older_than_ms`, `batch` above
/// 3000, `pause` above 60000 ms; `SP_ERR_JOURNAL` when the storage fails (what earlier batches
/// removed stays removed). `*options` is read once, before anything is written: it may share
/// memory with `*out`.
///
/// # Safety
/// `journal` is NULL or live; `options` is NULL or readable; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_prune(
    journal: *const sp_journal,
    options: *const sp_prune_options,
    out: *mut sp_prune_report,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or live / readable pointers; the options are copied
        // before `out` is taken, so the two may overlap.
        let (journal, options) = unsafe { (args::object("journal", journal)?, *args::object("options", options)?) };
        // SAFETY: the caller promises NULL or a writable sp_prune_report.
        let out = unsafe { args::out("out", out)? };
        let defaults = PruneOptions::older_than(Duration::from_millis(options.older_than_ms));
        let options = PruneOptions {
            forget_older_than: (options.forget_older_than_ms != 0)
                .then(|| Duration::from_millis(options.forget_older_than_ms)),
            batch: if options.batch == 0 { defaults.batch } else { options.batch as usize },
            pause: Duration::from_millis(options.pause_ms.into()),
            max_time: (options.max_time_ms != 0).then(|| Duration::from_millis(options.max_time_ms)),
            ..defaults
        };
        let r = journal.inner.prune(&options)?;
        out.write_zero_padded(sp_prune_report {
            compacted: r.compacted,
            forgotten: r.forgotten,
            refused_removed: r.refused_removed,
            conflicts_removed: r.conflicts_removed,
            batches: r.batches,
            longest_batch_us: u64::try_from(r.longest_batch.as_micros()).unwrap_or(u64::MAX),
            bytes_returned: r.bytes_returned,
            complete: r.complete,
            export_running: r.export_running,
        });
        Ok(())
    })
}

/// What `sp_journal_report` lists. The function takes the kind as an `int32_t`, so that any
/// value a host passes is safe: one not listed here is refused.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_journal_report_kind {
    /// Index jumps, reused indexes, renumberings and moved events, newest first: objects with
    /// `id`, `kind` (`jump`, `reused`, `renumbered`, `moved`: an index that came with the event
    /// of a key held at another index, `previous_highest`, and was not counted seen), `index`,
    /// `previous_highest`, `key`, `name`, `other_key`,
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
/// new numbering. Fails with `SP_ERR_INVALID_ARGUMENT`, field `first_index` (negative, or
/// indexes of the current numbering are missing: the message names them; recover or resolve
/// them first, or give them up with `sp_journal_renumber_giving_up_gaps`) or `note`;
/// `SP_ERR_JOURNAL` when the storage fails.
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
    // SAFETY: forwarded caller promise.
    unsafe { renumber_with(journal, first, note, numbering, Journal::renumber) }
}

/// `sp_journal_renumber`, giving up the missing indexes of the current numbering: each range
/// is recorded as resolved by hand (the `SP_JOURNAL_REPORT_RESOLUTIONS` report) with the note
/// "given up by renumbering from FIRST: NOTE", in the same transaction. Arguments, results and
/// failures as `sp_journal_renumber`'s, without the refusal of missing indexes.
///
/// # Safety
/// `journal` is NULL or live; `note` is NULL or NUL-terminated; `numbering` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_renumber_giving_up_gaps(
    journal: *const sp_journal,
    first: i64,
    note: *const c_char,
    numbering: *mut i64,
) -> sp_status {
    // SAFETY: forwarded caller promise.
    unsafe { renumber_with(journal, first, note, numbering, Journal::renumber_giving_up_gaps) }
}

/// The two renumberings' common body: `renumber` of the journal with `first` and `note`, the new
/// numbering written to `numbering` when it is not NULL.
///
/// # Safety
/// As `sp_journal_renumber`.
unsafe fn renumber_with(
    journal: *const sp_journal,
    first: i64,
    note: *const c_char,
    numbering: *mut i64,
    renumber: fn(&Journal, i64, &str) -> Result<i64>,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, note) = unsafe { (args::object("journal", journal)?, args::text("note", note)?) };
        let new = renumber(&journal.inner, first, note)?;
        // SAFETY: the caller promises NULL or a writable int64_t.
        unsafe { write_optional(numbering, new) };
        Ok(())
    })
}

/// Copies a SQLite journal into a new file at `dest_path` while workers go on writing, with
/// SQLite's online backup API: the copy holds every delivery committed when the backup started,
/// is written beside `dest_path` (created 0600) and takes that name only once complete, so a
/// failed or interrupted backup never leaves a half copy there. The copy is a journal of its
/// own (`sp_journal_open` of `sqlite:<dest_path>` opens it). Writers are never held up; the call
/// returns when the copy is in place (about 5 s a gigabyte). A `fork` of this process
/// waits for a backup in progress: call it from a process that does not fork meanwhile.
///
/// Fails with `SP_ERR_INVALID_ARGUMENT`, field `dest` for a `dest_path` that is NULL, not UTF-8,
/// a file or link that exists (a backup never replaces one), or in a folder that does not exist
/// or is not writable; field `journal_url` for a PostgreSQL journal (the message gives the
/// `pg_dump` command: PostgreSQL has its own tools); `SP_ERR_JOURNAL` when reading the journal
/// or writing the copy fails (a full disk; nothing is left at `dest_path`). `dest_path` is only
/// read during the call.
///
/// # Safety
/// `journal` is NULL or live; `dest_path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_backup(journal: *const sp_journal, dest_path: *const c_char) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, dest) = unsafe { (args::object("journal", journal)?, args::text("dest", dest_path)?) };
        journal.inner.backup(std::path::Path::new(dest))?;
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

/// The format of an export file (values for `sp_journal_export`, which takes it as an `int32_t`
/// so that any value a host passes is safe: one not listed here is refused).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_export_format {
    /// CSV after RFC 4180: a header row, then one record per delivery, lines ended by CRLF.
    SP_EXPORT_CSV = 1,
    /// JSON Lines: one JSON object per delivery and line, `null` for an empty column.
    SP_EXPORT_JSONL = 2,
}

/// Writes every delivery the journal holds whose first delivery lies in `since_ms` to
/// `until_ms` (ms since the Unix epoch, `until_ms` left out) to a new file at `path`, for
/// reconciliation with the service's reports: per delivery its index, key, event,
/// `transactionId`, `playerIdentifier`, `playerPartnerIdentifier`, a payout's `moneyWon`,
/// `coinsWon`, `isMoney` and `currencyISO4217` (empty for a refund), `gameSessionId`, the
/// outcome its stored reply tells (`success`, `failure`, `unknown`; the state for one not
/// finished), the reply's `errorMessage`, state, attempts and times (RFC 3339, UTC); docs/operating.md,
/// "Reconciliation", lists the columns. `format` is an `sp_export_format`. The file is created
/// 0600 (it names players) beside `path` under a temporary name and takes the name `path` only
/// once complete and flushed: there is never a half export at `path`, and an existing file is
/// never replaced. The journal is read 1,000 rows at a time, each in a short read transaction:
/// memory stays constant and workers are never held up. The export holds the journal's lock
/// `export` meanwhile, which retention (`sp_journal_prune`) waits for; one export runs at a time
/// per journal. On success `*rows_out` (when `rows_out` is not NULL) gets the number of rows
/// written. `path` is only read during the call.
///
/// Fails with `SP_ERR_INVALID_ARGUMENT`, field `format` for a value that is no
/// `sp_export_format`, field `until_ms` when `until_ms` is not after `since_ms`, field `path` for
/// a `path` that is NULL, not UTF-8, names a file or link that exists, lies in a folder that does
/// not exist or is not writable, or cannot be written (a full disk: the message says why;
/// nothing is left at `path`); `SP_ERR_BUSY` (field `lock`) while another export of the journal
/// runs (the message names it); `SP_ERR_JOURNAL` when reading the journal fails.
///
/// # Safety
/// `journal` is NULL or live; `path` is NULL or NUL-terminated; `rows_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_journal_export(
    journal: *const sp_journal,
    since_ms: i64,
    until_ms: i64,
    format: i32,
    path: *const c_char,
    rows_out: *mut u64,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (journal, path) = unsafe { (args::object("journal", journal)?, args::text("path", path)?) };
        let format = match format {
            1 => ExportFormat::Csv,
            2 => ExportFormat::Jsonl,
            other => {
                let problem = format!("expected an sp_export_format (1 SP_EXPORT_CSV, 2 SP_EXPORT_JSONL), got {other}");
                return Err(Error::field(ErrorKind::InvalidArgument, "format", problem).into());
            }
        };
        let rows = journal.inner.export_to_file(since_ms, until_ms, format, std::path::Path::new(path), &mut |_| {})?;
        // SAFETY: the caller promises NULL or a writable uint64_t.
        unsafe { write_optional(rows_out, rows) };
        Ok(())
    })
}
