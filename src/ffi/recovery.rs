//! Recovery of lost events, pull-style: `sp_recovery_new`, then `sp_recovery_next` until it gives
//! no event, each one already claimed (run the handler, `sp_event_reply`, `sp_event_finish`, as
//! for a callback), then `sp_recovery_report`.

use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::ffi::args;
use crate::ffi::client::sp_client;
use crate::ffi::event::{self, sp_event};
use crate::ffi::owned;
use crate::ffi::receiver::sp_receiver;
use crate::ffi::status::sp_status;
use crate::ffi::str::{Arena, sp_str};
use crate::journal::recovery::{FailureReason, Recovery};

/// A recovery in progress. Created by `sp_recovery_new`, freed by `sp_recovery_free`. One thread
/// at a time. Events it hands out stay valid after it is freed.
pub struct sp_recovery {
    inner: Recovery,
    /// The last report handed out, with the strings its failures view.
    report: Option<ReportBox>,
}

/// What the last report's views point into, kept alive until the next report or the free
/// (moving the vectors here does not move their buffers).
struct ReportBox {
    _failures: Vec<sp_recovery_failure>,
    _arena: Arena,
}

/// Why a missing event was not recovered.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_recovery_reason {
    /// The service answered 404: it knows no event with this index.
    SP_RECOVERY_NOT_FOUND = 1,
    /// The service could not be reached, timed out, or answered another HTTP error.
    SP_RECOVERY_SERVICE = 2,
    /// The answer or the event in it is not valid (it failed the callback validation, or carries
    /// another index than the one asked for).
    SP_RECOVERY_INVALID_EVENT = 3,
    /// The journal refused or failed it (a conflict, a busy claim, a storage failure).
    SP_RECOVERY_JOURNAL = 4,
}

/// A missing event that was not recovered. `message` names the field or the HTTP status.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_recovery_failure {
    pub index: i64,
    pub reason: sp_recovery_reason,
    pub status: sp_status,
    pub message: sp_str,
}

/// What a recovery did so far, from `sp_recovery_report`. `failures` (`failures_len` entries,
/// NULL when none) is owned by the recovery: valid until the next `sp_recovery_report` on it or
/// `sp_recovery_free`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_recovery_summary {
    /// Missing indexes the recovery set out to fetch.
    pub missing: u64,
    /// Events fetched and handed out, claimed.
    pub recovered: u64,
    /// Events fetched but handled meanwhile by a late delivery (or not journaled).
    pub handled_meanwhile: u64,
    pub failures: *const sp_recovery_failure,
    pub failures_len: usize,
    /// Missing indexes no longer fetched: the service answered 404 for them `not_found_limit`
    /// runs (`sp_journal_config_set_not_found_limit`). They stay missing until resolved by hand
    /// (`sp_journal_resolve`); the `SP_JOURNAL_REPORT_UNRECOVERABLE` report lists them.
    pub unrecoverable: usize,
}

// Padded where a 32-bit target aligns `u64` to 8 (ARM: 4 bytes after `unrecoverable`), none on
// 64-bit ones: written over zeros wherever it is.
impl_zero_padded!(sp_recovery_summary { missing, recovered, handled_meanwhile, failures, failures_len, unrecoverable });

/// Starts a recovery of the events missing from `receiver`'s journal (at most `limit` indexes,
/// at most 1,000,000), fetched through `client` (`sp_client_config_set_fetch_*` say how). Fails
/// with `SP_ERR_INVALID_ARGUMENT` when the receiver has no journal, `SP_ERR_JOURNAL` when the
/// journal cannot be read. Fetches nothing yet. On success `*out` owns the recovery; free it with
/// `sp_recovery_free`.
///
/// # Safety
/// `receiver` and `client` are NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_recovery_new(
    receiver: *const sp_receiver,
    client: *const sp_client,
    limit: usize,
    out: *mut *mut sp_recovery,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (receiver, client, out) =
            unsafe { (args::object("receiver", receiver)?, args::object("client", client)?, args::out("out", out)?) };
        if limit == 0 {
            return Err(Error::field(ErrorKind::InvalidArgument, "limit", "expected at least 1").into());
        }
        let recovery = Recovery::new(Arc::clone(&receiver.inner), client.client.clone(), limit)?;
        out.write(owned::into_raw(sp_recovery { inner: recovery, report: None }));
        Ok(())
    })
}

/// Fetches missing events until one is recovered, and hands it out already claimed in the
/// journal: read its fields, run the handler, `sp_event_reply`, then `sp_event_finish` (or
/// `sp_event_abandon`), and `sp_event_free`, exactly as for a callback. `*out` is NULL when every
/// missing index was tried. Indexes that fail are kept in the report and skipped. Blocks for the
/// calls to the service. On success with an event, `*out` owns it.
///
/// # Safety
/// `recovery` is NULL or live and used by no other thread; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_recovery_next(recovery: *mut sp_recovery, out: *mut *mut sp_event) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (recovery, out) = unsafe { (args::object_mut("recovery", recovery)?, args::out("out", out)?) };
        let Some(recovered) = recovery.inner.next_event() else {
            out.write(std::ptr::null_mut());
            return Ok(());
        };
        let receiver = Arc::clone(recovery.inner.receiver());
        // Read as `Recovery` read it when it claimed the event: it parsed then.
        let event = receiver.parse(recovered.body.as_bytes())?;
        out.write(event::into_raw_claimed(&event, &receiver, recovered.claim));
        Ok(())
    })
}

/// What the recovery did so far: counts, each failure with its index, reason and message, and
/// how many missing indexes are unrecoverable. The failures are owned by the recovery (see
/// `sp_recovery_summary`).
///
/// # Safety
/// `recovery` is NULL or live and used by no other thread; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_recovery_report(recovery: *mut sp_recovery, out: *mut sp_recovery_summary) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented.
        let (recovery, out) = unsafe { (args::object_mut("recovery", recovery)?, args::out("out", out)?) };
        let report = recovery.inner.report();
        let mut arena = Arena::for_strings(report.failures.iter().map(|f| f.error.message.as_str()));
        let failures: Vec<sp_recovery_failure> = report
            .failures
            .iter()
            .map(|f| sp_recovery_failure {
                index: f.index,
                reason: reason(f.reason),
                status: sp_status::from(f.error.kind),
                message: arena.push(&f.error.message.replace('\0', "\u{FFFD}")),
            })
            .collect();
        let counts = [report.missing, report.recovered, report.handled_meanwhile];
        write_report(out, counts, &failures, report.unrecoverable.len());
        recovery.report = Some(ReportBox { _failures: failures, _arena: arena });
        Ok(())
    })
}

/// `counts`: missing, recovered, handled meanwhile.
fn write_report(
    out: args::Out<'_, sp_recovery_summary>,
    [missing, recovered, handled_meanwhile]: [u64; 3],
    failures: &[sp_recovery_failure],
    unrecoverable: usize,
) {
    out.write_zero_padded(sp_recovery_summary {
        missing,
        recovered,
        handled_meanwhile,
        failures: if failures.is_empty() { std::ptr::null() } else { failures.as_ptr() },
        failures_len: failures.len(),
        unrecoverable,
    });
}

fn reason(reason: FailureReason) -> sp_recovery_reason {
    match reason {
        FailureReason::NotFound => sp_recovery_reason::SP_RECOVERY_NOT_FOUND,
        FailureReason::Service => sp_recovery_reason::SP_RECOVERY_SERVICE,
        FailureReason::InvalidEvent => sp_recovery_reason::SP_RECOVERY_INVALID_EVENT,
        FailureReason::Journal => sp_recovery_reason::SP_RECOVERY_JOURNAL,
    }
}

/// Frees a recovery. NULL is allowed and does nothing. Events it handed out stay valid.
///
/// # Safety
/// `recovery` is NULL or came from `sp_recovery_new` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_recovery_free(recovery: *mut sp_recovery) {
    // SAFETY: forwarded caller promise.
    value_boundary!((), { unsafe { owned::free::<sp_recovery, _>(recovery) } })
}
