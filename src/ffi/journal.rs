//! The delivery journal: `sp_journal_config_*` to configure it, `sp_journal_open`, then attach it
//! to a receiver (`sp_receiver_config_set_journal`) and claim each event with `sp_event_begin`
//! (in `ffi/event.rs`). `sp_journal_status` and `sp_journal_missing` answer what was seen.

use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::ffi::args;
use crate::ffi::owned;
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
/// caller.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_journal_stats {
    /// Deliveries handled: finished with a stored reply.
    pub handled: u64,
    /// Deliveries answered from the journal with a stored reply.
    pub replayed: u64,
    /// Deliveries refused because their key came before with other content.
    pub conflicts: u64,
    /// Deliveries refused by validation whose index could be read.
    pub refused: u64,
    /// Deliveries claimed and neither finished nor abandoned.
    pub in_progress: u64,
    /// Indexes between the first index and the highest seen that were never seen.
    pub missing: u64,
    /// The index gap detection counts from (configured, else the lowest seen).
    pub has_first_index: bool,
    pub first_index: i64,
    /// The highest index seen.
    pub has_highest_index: bool,
    pub highest_index: i64,
    /// Every index from the first up to this one was seen.
    pub has_watermark: bool,
    pub watermark: i64,
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
/// up to 64 KiB, lock time-out 5 s. On success `*out` owns the configuration; free it with
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

/// Counts and gap figures: handled, replayed, conflicts, refused, in progress, missing, and the
/// first index, highest index and watermark. Fails with `SP_ERR_JOURNAL` when the storage fails.
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
